package scheduler

import (
	"math/bits"
	"sync/atomic"

	"github.com/dualmap/dualmap/internal/hashing"
)

// blockSet is the membership half of kvIndex: a set of block hashes that
// any number of goroutines read without a lock while one writer at a time
// (the kvIndex's owner, under its instance's lock) changes it.
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

	// The writer's bookkeeping.
	live int // keys in tab
	used int // non-empty slots in tab (keys and removed)
}

type setTable struct {
	slots []atomic.Uint64
	shift uint // 64 - log2(len(slots))
}

const (
	slotEmpty   = 0
	slotRemoved = 1
	minSetSlots = 16
)

func newSetTable(n int) *setTable {
	n = max(n, minSetSlots)
	lg := bits.Len(uint(n - 1)) // n rounded up to a power of two is 1<<lg
	return &setTable{slots: make([]atomic.Uint64, 1<<lg), shift: uint(64 - lg)}
}

func (t *setTable) home(h uint64) int { return int((h * hashing.Golden) >> t.shift) }

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

// add puts h in the set. Writer only.
func (s *blockSet) add(h uint64) {
	if h <= slotRemoved {
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
		v := t.slots[i].Load()
		if v == h {
			return
		}
		if v == slotEmpty {
			break
		}
		if v == slotRemoved && free < 0 {
			free = i
		}
	}
	if free < 0 {
		free = i
		s.used++
	}
	t.slots[free].Store(h)
	s.live++
}

// remove takes h out of the set. Writer only.
func (s *blockSet) remove(h uint64) {
	if h <= slotRemoved {
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
	s.live, s.used = 0, 0
	s.tab.Store(nil)
}
