package scheduler

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dualmap/dualmap/internal/hashing"
)

// blockSet agrees with a map under random puts and removes, the special
// keys 0 and 1 included, across rebuilds.
func TestBlockSetMatchesMap(t *testing.T) {
	var s blockSet
	want := map[uint64]int32{}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		h := uint64(rng.IntN(3000))
		if rng.IntN(3) == 0 {
			h = rng.Uint64() // mostly absent
		}
		if rng.IntN(2) == 0 {
			v := rng.Int32()
			s.put(h, v)
			want[h] = v
		} else {
			s.remove(h)
			delete(want, h)
		}
		if i%1000 == 0 {
			for k := uint64(0); k < 3000; k++ {
				v, ok := want[k]
				if got := s.contains(k); got != ok {
					t.Fatalf("step %d: contains(%d) = %v, want %v", i, k, got, ok)
				}
				if got, gok := s.get(k); gok != ok || got != v {
					t.Fatalf("step %d: get(%d) = %d, %v, want %d, %v", i, k, got, gok, v, ok)
				}
			}
			if s.len() != len(want) {
				t.Fatalf("step %d: len() = %d, want %d", i, s.len(), len(want))
			}
		}
	}
	s.clear()
	if s.contains(5) || s.contains(0) {
		t.Error("contains after clear")
	}
}

// Readers never miss a key that stays in the set while a writer churns
// others (run with -race).
func TestBlockSetConcurrentReaders(t *testing.T) {
	var s blockSet
	const stable = 500
	for h := uint64(2); h < 2+stable; h++ {
		s.put(h, int32(h))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for h := uint64(2); h < 2+stable; h++ {
					if !s.contains(h) {
						t.Errorf("contains(%d) = false while it stayed in the set", h)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 20000; i++ {
		h := uint64(1<<32 + i)
		s.put(h, int32(h))
		if i >= 100 {
			s.remove(h - 100)
		}
	}
	close(stop)
	wg.Wait()
}

// Churn with a bounded number of keys keeps the table bounded: removed
// slots are reclaimed by the rebuilds, and a rebuild sizes the table for
// the keys present (half load), so 100 keys never take more than 4 x 128
// slots however many were added and removed. Pins the live-key count
// (remove's live--: counted up, each rebuild doubles the table), the
// rebuild's size (2 x (live+1) rounded up to a power of two) and the
// table size's rounding in newSetTable.
func TestBlockSetChurnStaysBounded(t *testing.T) {
	var s blockSet
	const keep = 100
	maxSlots := 0
	for i := uint64(2); i < 100_000; i++ {
		s.put(i*hashing.Golden, int32(i))
		if i >= keep+2 {
			s.remove((i - keep) * hashing.Golden)
		}
		maxSlots = max(maxSlots, len(s.tab.Load().slots))
	}
	if s.len() != keep {
		t.Fatalf("len() = %d after the churn, want %d", s.len(), keep)
	}
	if maxSlots > 4*128 {
		t.Errorf("the table reached %d slots holding at most %d keys, want <= %d", maxSlots, keep, 4*128)
	}
	if n := len(newSetTable(100).slots); n != 128 {
		t.Errorf("newSetTable(100) has %d slots, want 128 (100 rounded up to a power of two)", n)
	}
	if n := len(newSetTable(128).slots); n != 128 {
		t.Errorf("newSetTable(128) has %d slots, want 128", n)
	}
	for i := uint64(100_000 - keep); i < 100_000; i++ {
		if !s.contains(i * hashing.Golden) {
			t.Fatalf("key %d missing after the churn", i)
		}
	}
}
