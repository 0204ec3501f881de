package scheduler

import (
	"math/rand/v2"
	"testing"
)

func TestKVIndexCachedBlocks(t *testing.T) {
	kv := newKVIndex(100)
	a := prompt(1, 1, 4, 10) // shares 4 blocks with b
	b := prompt(1, 2, 4, 8)
	kv.add(a)
	tests := []struct {
		name   string
		blocks []uint64
		want   int
	}{
		{"same prompt", a, 10},
		{"shared prefix", b, 4},
		{"longer prompt", append(append([]uint64{}, a...), 12345), 10},
		{"unrelated", prompt(2, 3, 0, 5), 0},
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kv.cachedBlocks(tt.blocks); got != tt.want {
				t.Errorf("cachedBlocks() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestKVIndexCapacityAndPrefixClosure(t *testing.T) {
	const capacity = 64
	kv := newKVIndex(capacity)
	rng := rand.New(rand.NewPCG(1, 2))
	var added [][]uint64
	for i := 0; i < 2000; i++ {
		p := prompt(uint64(rng.IntN(5)), uint64(i), rng.IntN(6), 1+rng.IntN(20))
		kv.add(p)
		added = append(added, p)
		if kv.len() > capacity {
			t.Fatalf("len() = %d, want <= %d", kv.len(), capacity)
		}
	}
	// Prefix closure: for every prompt ever added, the held blocks form a
	// prefix, so the binary search agrees with a linear scan.
	for _, p := range added {
		linear := 0
		for linear < len(p) {
			if !kv.slot.contains(p[linear]) {
				break
			}
			linear++
		}
		for j := linear; j < len(p); j++ {
			if kv.slot.contains(p[j]) {
				t.Fatalf("block %d held but block %d is not: not prefix-closed", j, linear)
			}
		}
		if got := kv.cachedBlocks(p); got != linear {
			t.Fatalf("cachedBlocks() = %d, want %d", got, linear)
		}
	}
	// The most recent prompt is fully held.
	last := added[len(added)-1]
	if got := kv.cachedBlocks(last); got != len(last) {
		t.Errorf("cachedBlocks(last) = %d, want %d", got, len(last))
	}
}

func TestKVIndexLRUOrder(t *testing.T) {
	kv := newKVIndex(6)
	a, b, c := prompt(1, 1, 0, 3), prompt(2, 2, 0, 3), prompt(3, 3, 0, 3)
	kv.add(a)
	kv.add(b)
	kv.add(a) // a is now more recent than b
	kv.add(c) // evicts b
	if kv.cachedBlocks(a) != 3 || kv.cachedBlocks(c) != 3 || kv.cachedBlocks(b) != 0 {
		t.Errorf("after LRU eviction: a=%d b=%d c=%d, want 3 0 3", kv.cachedBlocks(a), kv.cachedBlocks(b), kv.cachedBlocks(c))
	}
	kv.setCapacity(2)
	if kv.len() != 2 || kv.cachedBlocks(c) != 2 {
		t.Errorf("after shrinking: len=%d c=%d, want 2 2", kv.len(), kv.cachedBlocks(c))
	}
	kv.add(b) // reuses freed nodes
	if kv.len() != 2 || kv.cachedBlocks(b) != 2 {
		t.Errorf("after re-adding: len=%d b=%d, want 2 2", kv.len(), kv.cachedBlocks(b))
	}
}

func TestKVIndexZeroAllocLookup(t *testing.T) {
	kv := newKVIndex(1000)
	p := prompt(1, 1, 0, 64)
	kv.add(p)
	if a := testing.AllocsPerRun(100, func() { kv.cachedBlocks(p) }); a != 0 {
		t.Errorf("cachedBlocks allocs = %v, want 0", a)
	}
	if a := testing.AllocsPerRun(100, func() { kv.add(p) }); a != 0 {
		t.Errorf("add (steady state) allocs = %v, want 0", a)
	}
}

// Re-listing a member with a smaller cache capacity shrinks its KV index
// at once, to the new bound, keeping the prefix (the deepest blocks go
// first), and the bound holds for what is added later; a larger capacity
// lets it grow again. Pins SetInstances' setCapacity for a known member
// (left out, the index keeps its 40 blocks) and setCapacity's eviction
// (one block too many or too few, or the bound not kept for later adds).
func TestSetInstancesShrinksKVIndex(t *testing.T) {
	const bs = 512
	s, _ := mustNew(t, Config{Policy: "cache-affinity", BlockSize: bs}, 1)
	id := pool(1)[0].ID
	relist := func(blocks int) {
		t.Helper()
		if err := s.SetInstances([]Instance{{ID: id, CacheTokens: blocks * bs}}); err != nil {
			t.Fatalf("SetInstances(%d blocks) error = %v", blocks, err)
		}
	}
	cachedOf := func(blocks []uint64) int {
		t.Helper()
		d, err := s.Pick(req(blocks))
		if err != nil {
			t.Fatalf("Pick() error = %v", err)
		}
		return d.CachedTokens / bs
	}
	relist(100)
	long := prompt(1, 1, 0, 40)
	r := req(long)
	route(t, s, r)
	s.Complete(r)
	if got := state(s, id).CachedBlocks; got != 40 {
		t.Fatalf("CachedBlocks = %d after a 40-block prompt with room for 100, want 40", got)
	}
	relist(10)
	if got := state(s, id).CachedBlocks; got != 10 {
		t.Errorf("CachedBlocks = %d after re-listing with 10 blocks of capacity, want 10", got)
	}
	if got := cachedOf(long); got != 10 {
		t.Errorf("Pick() cached blocks of the prompt = %d after the shrink, want its first 10", got)
	}
	other := prompt(2, 2, 0, 30)
	r = req(other)
	route(t, s, r)
	s.Complete(r)
	if got := state(s, id).CachedBlocks; got != 10 {
		t.Errorf("CachedBlocks = %d after another 30-block prompt, want the bound of 10", got)
	}
	if got := cachedOf(other); got != 10 {
		t.Errorf("Pick() cached blocks of the newest prompt = %d, want 10", got)
	}
	relist(50)
	r = req(long)
	route(t, s, r)
	s.Complete(r)
	if got := state(s, id).CachedBlocks; got != 50 {
		t.Errorf("CachedBlocks = %d after growing to 50 blocks and a 40-block prompt on top of 10, want 50", got)
	}
}
