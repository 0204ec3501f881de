package tokenize

import (
	"slices"
	"testing"
)

func TestLRUBounds(t *testing.T) {
	tests := []struct {
		name                 string
		maxEntries, maxToken int
		sizes                []int // tokens of each added entry, keys 1..n
		wantKeys             []uint64
		wantTokens           int
		wantEvictions        uint64
	}{
		{"under both bounds", 4, 100, []int{10, 10}, []uint64{1, 2}, 20, 0},
		{"entry bound", 2, 100, []int{1, 1, 1, 1}, []uint64{3, 4}, 2, 2},
		{"token bound", 10, 25, []int{10, 10, 10}, []uint64{2, 3}, 20, 1},
		{"token bound evicts several", 10, 25, []int{5, 5, 5, 5, 21}, []uint64{5}, 21, 4},
		{"too big to store", 10, 25, []int{5, 26}, []uint64{1}, 5, 0},
		{"disabled", -1, 25, []int{5}, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newLRU(tt.maxEntries, tt.maxToken)
			for i, n := range tt.sizes {
				c.add(cacheKey{key: uint64(i + 1)}, make([]uint32, n))
			}
			var got []uint64
			for k := uint64(1); k <= uint64(len(tt.sizes)); k++ {
				if _, ok := c.get(cacheKey{key: k}); ok {
					got = append(got, k)
				}
			}
			if !slices.Equal(got, tt.wantKeys) {
				t.Errorf("keys held = %v, want %v", got, tt.wantKeys)
			}
			s := c.snapshot()
			if s.Tokens != tt.wantTokens || s.Entries != len(tt.wantKeys) || s.Evictions != tt.wantEvictions {
				t.Errorf("snapshot() = %+v, want Tokens %d, Entries %d, Evictions %d",
					s, tt.wantTokens, len(tt.wantKeys), tt.wantEvictions)
			}
		})
	}
}

func TestLRURecency(t *testing.T) {
	c := newLRU(2, 100)
	c.add(cacheKey{key: 1}, []uint32{1})
	c.add(cacheKey{key: 2}, []uint32{2})
	c.get(cacheKey{key: 1}) // 2 is now the least recently used
	c.add(cacheKey{key: 3}, []uint32{3})
	if _, ok := c.get(cacheKey{key: 2}); ok {
		t.Error("get(2) found, want evicted as least recently used")
	}
	if _, ok := c.get(cacheKey{key: 1}); !ok {
		t.Error("get(1) not found, want kept as recently used")
	}
}

func TestLRUGuardsCollisions(t *testing.T) {
	c := newLRU(10, 100)
	stored := cacheKey{key: 7, check: 1, role: "user", size: 3}
	c.add(stored, []uint32{1, 2})
	tests := []struct {
		name string
		k    cacheKey
		want bool
	}{
		{"same key", stored, true},
		{"other check", cacheKey{key: 7, check: 2, role: "user", size: 3}, false},
		{"other role", cacheKey{key: 7, check: 1, role: "system", size: 3}, false},
		{"other size", cacheKey{key: 7, check: 1, role: "user", size: 4}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := c.get(tt.k); ok != tt.want {
				t.Errorf("get(%+v) found = %v, want %v", tt.k, ok, tt.want)
			}
		})
	}
}

func TestLRUCopiesOnAdd(t *testing.T) {
	c := newLRU(10, 100)
	toks := []uint32{1, 2, 3}
	c.add(cacheKey{key: 1}, toks)
	toks[0] = 99
	got, _ := c.get(cacheKey{key: 1})
	if want := []uint32{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("get() = %v, want %v (the caller's later writes must not reach the cache)", got, want)
	}
}
