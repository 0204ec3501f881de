package kvevents

import (
	"github.com/dualmap/dualmap/internal/hashing"
)

// Target receives what the events say, in the router's own block keys:
// the chained hashes tokenize.Blocks computes from token ids, so that a
// request's blocks and an engine's stored blocks meet in one index. The
// pool implements it. Its methods must not block on I/O.
type Target interface {
	// Stored: instance id holds these blocks (a chain, parent first).
	Stored(id string, keys []uint64)
	// Removed: instance id no longer holds these blocks.
	Removed(id string, keys []uint64)
	// Cleared: instance id holds nothing (its cache was cleared, or it
	// restarted).
	Cleared(id string)
	// SetExact: whether instance id's index is to be the engine's report
	// (true) or the router's prediction corrected by the events (false).
	SetExact(id string, exact bool)
}

// Tracker keeps, per instance and data-parallel rank, the engine's block
// hashes mapped to the router's keys, and tells a Target what changes.
// Engines hash blocks with their own functions (SHA-256 or xxhash of
// their own inputs, seeds the router cannot know); a BlockStored event
// carries the token ids, so the router keys each block by its own chained
// hash of them, and BlockRemoved, which carries hashes only, is mapped
// through what was stored.
//
// An instance's view is exact while every rank's stream is complete
// (seen from the engine's start, after an AllBlocksCleared, or repaired
// by replay) and its block size is the pool's; otherwise the Target keeps
// its prediction and the events only correct it. Not for concurrent use:
// one subscriber goroutine owns it.
type Tracker struct {
	target    Target
	blockSize int
	maxBlocks int // per rank
	views     map[string]*view
	keys      []uint64 // scratch
	stats     TrackerStats
}

// TrackerStats counts what the tracker did with the events it was given.
type TrackerStats struct {
	Stored, Removed, Cleared uint64 // blocks (Cleared: events)
	// Orphans are stored blocks whose parent the tracker never saw (it
	// started after the parent was stored, or the parent had an extra
	// key): they cannot be keyed.
	Orphans uint64
	// Unkeyed are blocks with an extra key (LoRA, cache salt,
	// multimodal), other media than the GPU's, or other KV groups than 0.
	Unkeyed uint64
	// Overflows are ranks purged because they held more blocks than the
	// bound (events were lost without a gap showing it).
	Overflows uint64
}

type view struct {
	ranks    map[int]*rankView
	refs     map[uint64]uint32 // router key -> ranks holding it; only with more than one rank
	mismatch int               // the engine's block size when it differs from the pool's, else 0
	exact    bool              // as last told to the target
}

type rankView struct {
	blocks   map[uint64]uint64 // engine hash -> router key
	complete bool
}

// NewTracker returns a tracker feeding target, for a pool whose requests
// are cut in blocks of blockSize tokens, holding at most maxBlocks blocks
// per rank (<= 0: 1<<22).
func NewTracker(target Target, blockSize, maxBlocks int) *Tracker {
	if maxBlocks <= 0 {
		maxBlocks = 1 << 22
	}
	return &Tracker{target: target, blockSize: blockSize, maxBlocks: maxBlocks, views: map[string]*view{}}
}

// Stats returns the counts so far.
func (t *Tracker) Stats() TrackerStats { return t.stats }

func (t *Tracker) view(id string) *view {
	v := t.views[id]
	if v == nil {
		v = &view{ranks: map[int]*rankView{}}
		t.views[id] = v
	}
	return v
}

func (v *view) rank(r int) *rankView {
	if r < 0 {
		r = 0
	}
	rv := v.ranks[r]
	if rv == nil {
		rv = &rankView{blocks: map[uint64]uint64{}}
		v.ranks[r] = rv
		if len(v.ranks) == 2 { // from now on a key may be held by several ranks
			v.refs = map[uint64]uint32{}
			for _, o := range v.ranks {
				for _, k := range o.blocks {
					v.refs[k]++
				}
			}
		}
	}
	return rv
}

// Mismatch returns the engine's block size when instance id's events use
// another block size than the pool's (its events are then ignored), or 0.
func (t *Tracker) Mismatch(id string) int {
	if v := t.views[id]; v != nil {
		return v.mismatch
	}
	return 0
}

// Exact reports whether instance id's view is exact.
func (t *Tracker) Exact(id string) bool {
	v := t.views[id]
	return v != nil && v.exact
}

// Blocks returns how many distinct blocks instance id holds as far as the
// events say.
func (t *Tracker) Blocks(id string) int {
	v := t.views[id]
	switch {
	case v == nil:
		return 0
	case v.refs != nil:
		return len(v.refs)
	}
	n := 0
	for _, rv := range v.ranks {
		n += len(rv.blocks)
	}
	return n
}

// Apply applies a batch from instance id's publisher of rank.
func (t *Tracker) Apply(id string, rank int, b *Batch) {
	v := t.view(id)
	if v.mismatch != 0 {
		return
	}
	rv := v.rank(rank)
	for i := range b.Events {
		e := &b.Events[i]
		switch e.Kind {
		case BlockStored:
			if e.BlockSize != t.blockSize {
				v.mismatch = e.BlockSize
				t.purge(id, v, -1)
				t.update(id, v)
				return
			}
			t.stored(id, v, rv, e)
			if len(rv.blocks) > t.maxBlocks {
				t.stats.Overflows++
				t.purgeRank(id, v, rank)
				rv.complete = false
			}
		case BlockRemoved:
			t.removed(id, v, rv, e)
		case AllBlocksCleared:
			t.stats.Cleared++
			t.purgeRank(id, v, rank)
			rv.complete = true // the engine holds nothing: the view is whole from here
		}
	}
	t.update(id, v)
}

func (t *Tracker) stored(id string, v *view, rv *rankView, e *Event) {
	if e.Medium != GPU || e.Group != 0 {
		t.stats.Unkeyed += uint64(len(e.Hashes))
		return
	}
	parent := uint64(0)
	if e.HasParent {
		k, ok := rv.blocks[e.Parent]
		switch {
		case !ok && e.Parent == 0:
			// No parent: the array encoding of llm-d's simulator (and
			// publishers like it) writes 0 where vLLM writes nil.
		case !ok:
			t.stats.Orphans += uint64(len(e.Hashes))
			return
		default:
			parent = k
		}
	}
	t.stats.Unkeyed += uint64(len(e.Hashes) - e.Keyable)
	keys := t.keys[:0]
	for i := 0; i < e.Keyable; i++ {
		k := hashing.Block(parent, e.Tokens[i*e.BlockSize:(i+1)*e.BlockSize])
		if old, ok := rv.blocks[e.Hashes[i]]; !ok {
			rv.blocks[e.Hashes[i]] = k
			if v.refs != nil {
				v.refs[k]++
			}
		} else if old != k { // the engine reused a hash for other tokens: keep the newer
			rv.blocks[e.Hashes[i]] = k
			if v.refs != nil {
				v.refs[k]++
				t.unref(v, old)
			}
		}
		keys = append(keys, k)
		parent = k
	}
	t.keys = keys
	if len(keys) > 0 {
		t.stats.Stored += uint64(len(keys))
		t.target.Stored(id, keys)
	}
}

// unref drops one rank's hold on key; true when no rank holds it now.
func (t *Tracker) unref(v *view, key uint64) bool {
	if v.refs == nil {
		return true
	}
	if n := v.refs[key]; n > 1 {
		v.refs[key] = n - 1
		return false
	}
	delete(v.refs, key)
	return true
}

func (t *Tracker) removed(id string, v *view, rv *rankView, e *Event) {
	if e.Medium != GPU || e.Group != 0 {
		return
	}
	keys := t.keys[:0]
	for _, h := range e.Hashes {
		k, ok := rv.blocks[h]
		if !ok {
			continue
		}
		delete(rv.blocks, h)
		if t.unref(v, k) {
			keys = append(keys, k)
		}
	}
	t.keys = keys
	if len(keys) > 0 {
		t.stats.Removed += uint64(len(keys))
		t.target.Removed(id, keys)
	}
}

// purgeRank forgets what rank holds of instance id and tells the target.
func (t *Tracker) purgeRank(id string, v *view, rank int) {
	if rank < 0 {
		rank = 0
	}
	rv := v.ranks[rank]
	if rv == nil {
		return
	}
	if v.refs == nil { // the only rank: the instance holds nothing
		clear(rv.blocks)
		t.target.Cleared(id)
		return
	}
	keys := t.keys[:0]
	for _, k := range rv.blocks {
		if t.unref(v, k) {
			keys = append(keys, k)
		}
	}
	clear(rv.blocks)
	t.keys = keys
	if len(keys) > 0 {
		t.target.Removed(id, keys)
	}
}

// purge forgets every rank of instance id (rank < 0), or one.
func (t *Tracker) purge(id string, v *view, rank int) {
	if rank >= 0 {
		t.purgeRank(id, v, rank)
		return
	}
	for _, rv := range v.ranks {
		clear(rv.blocks)
		rv.complete = false
	}
	if v.refs != nil {
		clear(v.refs)
	}
	t.target.Cleared(id)
}

// Restarted records that instance id's publisher of rank restarted: what
// it held is gone. complete says whether the stream is whole from here
// (its first message was the new process's first, seq 0).
func (t *Tracker) Restarted(id string, rank int, complete bool) {
	v := t.view(id)
	t.purgeRank(id, v, rank)
	v.rank(rank).complete = complete
	t.update(id, v)
}

// SetComplete records whether rank's stream of instance id is whole: a
// gap that replay could not fill makes it incomplete (the instance falls
// back to the prediction) until the engine clears its cache or restarts.
func (t *Tracker) SetComplete(id string, rank int, complete bool) {
	v := t.view(id)
	v.rank(rank).complete = complete
	t.update(id, v)
}

// Forget drops instance id (it left the pool): the target is told it is
// no longer exact.
func (t *Tracker) Forget(id string) {
	v := t.views[id]
	if v == nil {
		return
	}
	if v.exact {
		t.target.SetExact(id, false)
	}
	delete(t.views, id)
}

// update tells the target when instance id's view changes between exact
// and predicted. On becoming exact the target's index is rebuilt from
// what the events said: the prediction it held goes.
func (t *Tracker) update(id string, v *view) {
	exact := v.mismatch == 0 && len(v.ranks) > 0
	for _, rv := range v.ranks {
		exact = exact && rv.complete
	}
	if exact == v.exact {
		return
	}
	v.exact = exact
	t.target.SetExact(id, exact)
	if exact { // first exact, so that no prediction enters between these calls
		t.target.Cleared(id)
		for _, rv := range v.ranks {
			keys := t.keys[:0]
			for _, k := range rv.blocks {
				keys = append(keys, k)
			}
			t.keys = keys
			if len(keys) > 0 {
				t.target.Stored(id, keys)
			}
		}
	}
}
