package engine

import (
	"math/rand/v2"
	"testing"
)

// tiers returns the tier of each block.
func tiers(c *cache, blocks ...uint64) []uint8 {
	out := make([]uint8, len(blocks))
	for i, h := range blocks {
		out[i] = c.tier(h)
	}
	return out
}

func TestCacheTiers(t *testing.T) {
	const N, H, D = tierNone, tierHBM, tierDRAM
	tests := []struct {
		name      string
		hbm, dram int
		ops       [][]uint64 // each is inserted (touched deepest first)
		want      []uint8    // tiers of blocks 1..5
	}{
		{"fits in HBM", 2, 2, [][]uint64{{1}, {2}}, []uint8{H, H, N, N, N}},
		{"demotion", 2, 2, [][]uint64{{1}, {2}, {3}}, []uint8{D, H, H, N, N}},
		{"eviction from DRAM", 2, 2, [][]uint64{{1}, {2}, {3}, {4}, {5}}, []uint8{N, D, D, H, H}},
		{"promotion", 2, 2, [][]uint64{{1}, {2}, {3}, {1}}, []uint8{H, D, H, N, N}},
		{"LRU order", 2, 0, [][]uint64{{1}, {2}, {1}, {3}}, []uint8{H, N, H, N, N}},
		{"no HBM", 0, 3, [][]uint64{{1}, {2}, {3}, {4}}, []uint8{N, D, D, D, N}},
		{"no cache", 0, 0, [][]uint64{{1}, {2}}, []uint8{N, N, N, N, N}},
		{"prompt deepest first", 2, 2, [][]uint64{{1, 2, 3, 4}}, []uint8{H, H, D, D, N}},
		{"prompt longer than capacity", 1, 1, [][]uint64{{1, 2, 3, 4}}, []uint8{H, D, N, N, N}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(tt.hbm, tt.dram)
			for _, op := range tt.ops {
				c.insert(op)
			}
			got := tiers(c, 1, 2, 3, 4, 5)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("tiers of blocks 1..5 = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestCacheTouchReportsDRAM(t *testing.T) {
	c := newCache(1, 1)
	c.insert([]uint64{1})
	c.insert([]uint64{2}) // 1 demoted
	tests := []struct {
		h    uint64
		want bool
	}{
		{1, true},  // promoted, 2 demoted
		{1, false}, // already in HBM
		{2, true},
		{3, false}, // new
	}
	for _, tt := range tests {
		if got := c.touch(tt.h); got != tt.want {
			t.Errorf("touch(%d) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestCacheCapacityAndPrefixClosure(t *testing.T) {
	for _, caps := range [][2]int{{0, 0}, {7, 0}, {0, 7}, {5, 20}, {64, 64}} {
		t.Run("", func(t *testing.T) {
			c := newCache(caps[0], caps[1])
			rng := rand.New(rand.NewPCG(3, uint64(caps[0]*100+caps[1])))
			var prompts [][]uint64
			for i := range 3000 {
				p := chain(uint64(rng.IntN(50)), rng.IntN(8), 1+rng.IntN(24))
				prompts = append(prompts, p)
				if i%3 == 0 {
					// an admission: touch the cached prefix, deepest first
					hit := c.prefixLen(p)
					for j := hit - 1; j >= 0; j-- {
						c.touch(p[j])
					}
				} else {
					c.insert(p)
				}
				if c.hbmLen > c.hbmCap || c.dramLen > c.dramCap || len(c.slot) != c.len() {
					t.Fatalf("HBM %d/%d, DRAM %d/%d, %d slots: over capacity or inconsistent",
						c.hbmLen, c.hbmCap, c.dramLen, c.dramCap, len(c.slot))
				}
			}
			// Every prompt's cached blocks form a prefix, with its HBM blocks
			// before its DRAM blocks (parents are more recent than children).
			for _, p := range prompts {
				ts := tiers(c, p...)
				for j := 1; j < len(ts); j++ {
					if ts[j] != tierNone && (ts[j-1] == tierNone || ts[j-1] > ts[j]) {
						t.Fatalf("tiers along a prompt = %v: not prefix-closed", ts)
					}
				}
			}
		})
	}
}

func TestCacheNoAllocSteadyState(t *testing.T) {
	c := newCache(100, 300)
	rng := rand.New(rand.NewPCG(5, 6))
	prompts := make([][]uint64, 200)
	for i := range prompts {
		prompts[i] = chain(uint64(i%40), 2, 24)
	}
	for _, p := range prompts {
		c.insert(p) // fill the cache
	}
	allocs := testing.AllocsPerRun(1000, func() {
		p := prompts[rng.IntN(len(prompts))]
		hit := c.prefixLen(p)
		for j := hit - 1; j >= 0; j-- {
			c.touch(p[j])
		}
		c.insert(p)
	})
	if allocs != 0 {
		t.Errorf("allocations per admission and insert = %v, want 0", allocs)
	}
}
