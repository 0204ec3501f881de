package scheduler

import (
	"math/rand/v2"
	"sync"
	"testing"
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
