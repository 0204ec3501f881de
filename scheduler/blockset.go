package scheduler

import (
	"math/bits"
	"sync/atomic"

	"github.com/dualmap/dualmap/internal/hashing"
)

// blockSet maps block hashes to kvIndex nodes. Any number of goroutines
// test membership (contains) without a lock while one writer at a time (the
// kvIndex's owner, under its instance's lock) changes it; the values are
// the writer's alone.
//
// It is an open-addressing table with linear probing whose slots are
// atomics. A slot holds 0 (empty), 1 (a removed key: probing goes on past
// it) or a key; keys 0 and 1 themselves are kept aside in special. A key
// never moves while it is in the set, so a reader finds every key present
// for the whole of its lookup, whatever the writer does meanwhile; a key
// added or removed during the lookup may or may not be seen. The writer
// keeps a quarter of the slots empty, so every probe ends. When removed
// slots and keys fill three quarters, it copies the keys into a new table
// and publishes that one; readers still probing the old table see it as it
// was.
type blockSet struct {
	tab     atomic.Pointer[setTable]
	special [2]atomic.Bool

	// The writer's alone.
	specialVal [2]int32
	n          int // keys, special ones included
	live       int // keys in tab
	used       int // non-empty slots in tab (keys and removed)
}

type setTable struct {
	slots []atomic.Uint64
	vals  []int32 // the value of the key in the same slot; the writer's alone
	shift uint    // 64 - log2(len(slots))
}

const (
	slotEmpty   = 0
	slotRemoved = 1
	minSetSlots = 16
)

func newSetTable(n int) *setTable {
	n = max(n, minSetSlots)
	lg := bits.Len(uint(n - 1)) // n rounded up to a power of two is 1<<lg
	return &setTable{slots: make([]atomic.Uint64, 1<<lg), vals: make([]int32, 1<<lg), shift: uint(64 - lg)}
}

func (t *setTable) home(h uint64) int { return int((h * hashing.Golden) >> t.shift) }

// prefixLen returns how many leading blocks of a prompt the set holds,
// by binary search: the callers' sets are prefix-closed (a block is in
// only with every block before it). It does not lock or allocate.
func (s *blockSet) prefixLen(blocks []uint64) int {
	lo, hi := 0, len(blocks) // answer in [lo, hi]
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if s.contains(blocks[m-1]) {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// contains reports whether h is in the set. It does not lock or allocate.
func (s *blockSet) contains(h uint64) bool {
	if h <= slotRemoved {
		return s.special[h].Load()
	}
	t := s.tab.Load()
	if t == nil {
		return false
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.slots[i].Load() {
		case h:
			return true
		case slotEmpty:
			return false
		}
	}
}

// len is the number of keys. Writer only.
func (s *blockSet) len() int { return s.n }

// get returns h's value. Writer only.
func (s *blockSet) get(h uint64) (int32, bool) {
	if h <= slotRemoved {
		if !s.special[h].Load() {
			return 0, false
		}
		return s.specialVal[h], true
	}
	t := s.tab.Load()
	if t == nil {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.slots[i].Load() {
		case h:
			return t.vals[i], true
		case slotEmpty:
			return 0, false
		}
	}
}

// put sets h's value, adding h if it is not in the set. Writer only.
func (s *blockSet) put(h uint64, v int32) {
	if h <= slotRemoved {
		if !s.special[h].Load() {
			s.n++
		}
		s.specialVal[h] = v
		s.special[h].Store(true)
		return
	}
	t := s.tab.Load()
	if t == nil || (s.used+1)*4 > len(t.slots)*3 {
		t = s.rebuild(s.live + 1)
	}
	mask := len(t.slots) - 1
	free := -1
	i := t.home(h)
	for ; ; i = (i + 1) & mask {
		k := t.slots[i].Load()
		if k == h {
			t.vals[i] = v
			return
		}
		if k == slotEmpty {
			break
		}
		if k == slotRemoved && free < 0 {
			free = i
		}
	}
	if free < 0 {
		free = i
		s.used++
	}
	t.vals[free] = v
	t.slots[free].Store(h)
	s.live++
	s.n++
}

// remove takes h out of the set. Writer only.
func (s *blockSet) remove(h uint64) {
	if h <= slotRemoved {
		if s.special[h].Load() {
			s.n--
		}
		s.special[h].Store(false)
		return
	}
	t := s.tab.Load()
	if t == nil {
		return
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.slots[i].Load() {
		case h:
			t.slots[i].Store(slotRemoved)
			s.live--
			s.n--
			return
		case slotEmpty:
			return
		}
	}
}

// rebuild publishes a new table holding the keys, with room for want keys
// at half load, and returns it. Writer only.
func (s *blockSet) rebuild(want int) *setTable {
	nt := newSetTable(2 * want)
	mask := len(nt.slots) - 1
	if old := s.tab.Load(); old != nil {
		for i := range old.slots {
			h := old.slots[i].Load()
			if h <= slotRemoved {
				continue
			}
			j := nt.home(h)
			for nt.slots[j].Load() != slotEmpty {
				j = (j + 1) & mask
			}
			nt.vals[j] = old.vals[i]
			nt.slots[j].Store(h)
		}
	}
	s.used = s.live
	s.tab.Store(nt)
	return nt
}

// clear empties the set. Writer only.
func (s *blockSet) clear() {
	s.special[0].Store(false)
	s.special[1].Store(false)
	s.n, s.live, s.used = 0, 0, 0
	s.tab.Store(nil)
}
