package scheduler

import (
	"fmt"
	"slices"
	"testing"
)

// rotateWith observes requests until the table closes its current bucket
// (count-based windows rotate after Window/Buckets requests): next(i)
// gives the i-th request's blocks. It returns how many requests that took.
func rotateWith(k *keyDepth, next func(i int) []uint64) int {
	before := k.rotations
	i := 0
	for ; k.rotations == before; i++ {
		b := next(i)
		k.observe(b, k.depth(b), 0)
	}
	return i
}

// Many hot prefixes, few slots: the table never holds more than MaxSplits
// splits, and the ones it holds are the hottest.
func TestKeyDepthMaxSplits(t *testing.T) {
	for _, maxSplits := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("max_splits=%d", maxSplits), func(t *testing.T) {
			const n = 8 // split above 1/8 of the traffic
			k := newKeyDepth(KeyDepthConfig{Window: 1000, MaxSplits: maxSplits}.withDefaults(), n, 512)
			// Six prefixes of 6 shared blocks take 22%, 19%, 17%, 15%, 14%
			// and 13% of the traffic: each over the threshold at depth 2
			// and, through the look-ahead, at depth 3, so there are 12
			// candidates for the slots.
			weights := []int{22, 19, 17, 15, 14, 13}
			var seq []uint64
			for p, w := range weights {
				for range w {
					seq = append(seq, uint64(p+1))
				}
			}
			u := uint64(0)
			next := func(i int) []uint64 {
				u++
				return prompt(seq[i%len(seq)], u, 6, 8)
			}
			for range 30 {
				rotateWith(k, next)
				if len(k.split) > maxSplits {
					t.Fatalf("after %d rotations: %d splits, want <= MaxSplits %d", k.rotations, len(k.split), maxSplits)
				}
			}
			if len(k.split) != maxSplits {
				t.Errorf("%d splits with 12 prefixes over the threshold, want all %d slots used", len(k.split), maxSplits)
			}
			// The hottest prefix holds a slot: its depth-2 key, or deeper.
			hot := prompt(1, 1<<40, 6, 8)
			if d := k.depth(hot); d < 3 {
				t.Errorf("depth() of the hottest prefix = %d, want it split (>= 3)", d)
			}
			// And no split is of a prefix outside the six.
			var known []uint64
			for p := range weights {
				b := prompt(uint64(p+1), 1<<40, 6, 8)
				known = append(known, b[:6]...)
			}
			for h := range k.split {
				if !slices.Contains(known, h) {
					t.Errorf("split %x is not a shared prefix", h)
				}
			}
		})
	}
}

// A split imported from the leader is held here for a whole window before
// this table's own (cold) counts can merge it, as a split of its own would
// be; one it already had keeps its age.
func TestKeyDepthImportedSplitsHeldAWindow(t *testing.T) {
	cfg := KeyDepthConfig{Window: 1000}.withDefaults() // 10 buckets of 100
	k := newKeyDepth(cfg, 8, 512)
	u := uint64(0)
	cold := func(int) []uint64 { u++; return prompt(u, u, 0, 8) }
	for range 3 * cfg.Buckets { // run the table for a while: its clock is far from zero
		rotateWith(k, cold)
	}
	hot := prompt(77, 1, 6, 8)
	imported := hot[1] // the depth-2 key of a prefix this table never saw
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	for i := 1; i < cfg.Buckets; i++ {
		rotateWith(k, cold)
		if k.depth(hot) != 3 {
			t.Fatalf("%d rotations after the import: depth() = %d, want 3 (held for %d rotations)", i, k.depth(hot), cfg.Buckets)
		}
	}
	rotateWith(k, cold)
	if d := k.depth(hot); d != 2 {
		t.Errorf("%d rotations after the import: depth() = %d, want 2 (merged once held a window)", cfg.Buckets, d)
	}

	// Imported again (the leader republishes its table every round): a
	// split this table already has keeps its age, so it merges when its
	// first hold ends, not a window after the last import.
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	for range cfg.Buckets - 1 {
		rotateWith(k, cold)
	}
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	if d := k.depth(hot); d != 3 {
		t.Fatalf("re-imported: depth() = %d, want 3", d)
	}
	rotateWith(k, cold)
	if d := k.depth(hot); d != 2 {
		t.Errorf("a split held %d rotations, imported again: depth() = %d after one more rotation, want 2 (merged)", cfg.Buckets-1, d)
	}
}

// The look-ahead counts one block past a request's key, so a prefix hot
// several blocks deep splits two levels per rotation: its key grows from 2
// to past the shared part in 3 rotations instead of 5.
func TestKeyDepthLookAheadRotations(t *testing.T) {
	cfg := KeyDepthConfig{Window: 1000}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	u := uint64(0)
	// Half the traffic shares 6 blocks, the rest is unique.
	next := func(i int) []uint64 {
		u++
		if i%2 == 0 {
			return prompt(5, u, 6, 10)
		}
		return prompt(u, u, 0, 10)
	}
	probe := prompt(5, 1<<40, 6, 10)
	want := []int{4, 6, 7, 7, 7} // depth after each rotation; 7 is one block past the shared six
	var got []int
	for range want {
		if n := rotateWith(k, next); n != cfg.Window/cfg.Buckets {
			t.Fatalf("a bucket closed after %d requests, want Window/Buckets = %d", n, cfg.Window/cfg.Buckets)
		}
		got = append(got, k.depth(probe))
	}
	if !slices.Equal(got, want) {
		t.Errorf("depth() after each rotation = %v, want %v", got, want)
	}
}
