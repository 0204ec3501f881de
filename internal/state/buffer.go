package state

import (
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// record is one dispatch: a prompt's chained blocks sent to an instance.
type record struct {
	instance string
	blocks   []uint64
}

// cost is a record's weight against the buffer bound.
func (r record) cost() int { return len(r.blocks) + 1 }

// recordKey identifies a record for coalescing: chained hashes make the
// last block stand for the whole prompt.
type recordKey struct {
	instance string
	last     uint64
	n        int
}

func keyOf(r record) recordKey {
	return recordKey{instance: r.instance, last: r.blocks[len(r.blocks)-1], n: len(r.blocks)}
}

// buffer holds the dispatch records waiting for the publisher. Bounded by
// limit (in cost units); when full, the oldest records are dropped. Safe for
// concurrent use; every method holds the lock for O(1) work (plus the copy
// of the blocks in add), never for I/O.
type buffer struct {
	limit int
	st    *counters

	mu     sync.Mutex
	recs   []record // recs[head:] are waiting, oldest first
	head   int
	cost   int
	seen   map[recordKey]struct{}
	oldest time.Time // when the first record since the last take was added
}

func newBuffer(limit int, st *counters) *buffer {
	return &buffer{limit: limit, st: st, seen: make(map[recordKey]struct{})}
}

// add copies and appends a record, unless an identical one is waiting.
func (b *buffer) add(instance string, blocks []uint64, now func() time.Time) {
	if instance == "" || len(blocks) == 0 {
		return
	}
	if !utf8.ValidString(instance) { // protobuf strings must be UTF-8
		b.st.dropped.Add(1)
		return
	}
	if len(blocks) >= b.limit {
		blocks = blocks[:max(b.limit-1, 1)] // the prefix is what others share
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := record{instance: instance, blocks: blocks}
	k := keyOf(r)
	if _, ok := b.seen[k]; ok {
		b.st.coalesced.Add(1)
		return
	}
	r.blocks = slices.Clone(blocks)
	if b.head == len(b.recs) {
		b.oldest = now()
	}
	b.seen[k] = struct{}{}
	b.recs = append(b.recs, r)
	b.cost += r.cost()
	for b.cost > b.limit && b.head < len(b.recs) {
		b.dropOldest()
	}
}

func (b *buffer) dropOldest() {
	r := b.recs[b.head]
	b.recs[b.head] = record{}
	b.head++
	b.cost -= r.cost()
	delete(b.seen, keyOf(r))
	b.st.dropped.Add(1)
}

// take removes and returns every waiting record, oldest first, and when the
// oldest of them was recorded. The slice is the caller's.
func (b *buffer) take() ([]record, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.head == len(b.recs) {
		return nil, time.Time{}
	}
	out := b.recs[b.head:]
	b.recs = make([]record, 0, len(out))
	b.head, b.cost = 0, 0
	clear(b.seen)
	return out, b.oldest
}

// len returns the number of waiting records.
func (b *buffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.recs) - b.head
}
