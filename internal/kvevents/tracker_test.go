package kvevents

import (
	"slices"
	"testing"
)

func stored(hs []uint64, toks []uint32, parent uint64, hasParent bool) Event {
	return Event{Kind: BlockStored, Hashes: hs, Tokens: toks, BlockSize: 4, Parent: parent, HasParent: hasParent, Keyable: len(hs)}
}

func batch(evs ...Event) *Batch { return &Batch{Events: evs, Rank: -1} }

// Data-parallel ranks are separate caches behind one instance: a block
// both hold stays until both removed it, and one rank's restart purges
// its blocks only.
func TestTrackerRanks(t *testing.T) {
	rec := newRecorder()
	tr := NewTracker(rec, 4, 0)
	const id = "i"
	a, b := u32s(8, 1), u32s(4, 500)
	tr.Restarted(id, 0, true)
	tr.Restarted(id, 1, true)
	tr.Apply(id, 0, batch(stored([]uint64{10, 11}, a, 0, false)))
	tr.Apply(id, 1, batch(stored([]uint64{20, 21}, a, 0, false), stored([]uint64{22}, b, 0, false))) // rank 1's own hashes, same tokens
	if got, exact := rec.state(id); !exact || !slices.Equal(got, sortedKeys(a, b)) {
		t.Fatalf("after both ranks stored: %v exact %v, want %v", got, exact, sortedKeys(a, b))
	}
	tr.Apply(id, 0, batch(Event{Kind: BlockRemoved, Hashes: []uint64{10, 11}}))
	if got, _ := rec.state(id); !slices.Equal(got, sortedKeys(a, b)) {
		t.Errorf("rank 0 removed a's blocks, rank 1 still holds them: %v, want %v", got, sortedKeys(a, b))
	}
	tr.Apply(id, 0, batch(stored([]uint64{10, 11}, a, 0, false)))
	tr.Restarted(id, 1, true)
	if got, _ := rec.state(id); !slices.Equal(got, sortedKeys(a)) {
		t.Errorf("rank 1 restarted: %v, want rank 0's %v", got, sortedKeys(a))
	}
	if n := tr.Blocks(id); n != 2 {
		t.Errorf("Blocks() = %d, want 2", n)
	}
	tr.SetComplete(id, 1, false)
	if _, exact := rec.state(id); exact {
		t.Error("one rank incomplete, the view still exact")
	}
	tr.Forget(id)
	if _, exact := rec.state(id); exact || tr.Blocks(id) != 0 {
		t.Error("a forgotten instance is still tracked")
	}
}

func sortedKeys(prompts ...[]uint32) []uint64 {
	var out []uint64
	for _, p := range prompts {
		out = append(out, routerKeys(p, 4)...)
	}
	slices.Sort(out)
	return out
}

// What cannot be keyed is counted and left out; a re-stored block is
// idempotent; a bound overflow purges the rank and leaves the prediction.
func TestTrackerEdges(t *testing.T) {
	rec := newRecorder()
	tr := NewTracker(rec, 4, 3)
	const id = "i"
	tr.Restarted(id, 0, true)
	a := u32s(8, 1)
	cpu := stored([]uint64{1, 2}, a, 0, false)
	cpu.Medium = CPU
	group := stored([]uint64{1, 2}, a, 0, false)
	group.Group = 1
	salted := stored([]uint64{1, 2}, a, 0, false)
	salted.Keyable = 0
	orphan := stored([]uint64{5}, u32s(4, 9), 77, true)
	tr.Apply(id, 0, batch(cpu, group, salted, orphan))
	if got, _ := rec.state(id); len(got) != 0 {
		t.Errorf("unkeyable blocks indexed: %v", got)
	}
	if st := tr.Stats(); st.Unkeyed != 6 || st.Orphans != 1 {
		t.Errorf("stats = %+v, want 6 unkeyed, 1 orphan", st)
	}
	tr.Apply(id, 0, batch(stored([]uint64{1, 2}, a, 0, false), stored([]uint64{1, 2}, a, 0, false)))
	if got, _ := rec.state(id); !slices.Equal(got, sortedKeys(a)) || tr.Blocks(id) != 2 {
		t.Errorf("stored twice: %v (%d tracked), want %v", got, tr.Blocks(id), sortedKeys(a))
	}
	tr.Apply(id, 0, batch(stored([]uint64{3, 4}, u32s(8, 100), 0, false))) // 4 blocks > bound 3
	got, exact := rec.state(id)
	if exact || len(got) != 0 || tr.Stats().Overflows != 1 {
		t.Errorf("beyond the bound: %v exact %v, stats %+v; want purged, predicted, 1 overflow", got, exact, tr.Stats())
	}
	tr.Apply(id, 0, batch(Event{Kind: AllBlocksCleared}))
	if _, exact := rec.state(id); !exact {
		t.Error("AllBlocksCleared did not make the view whole again")
	}
	tr.Apply(id, 0, batch(Event{Kind: BlockStored, Hashes: []uint64{9}, Tokens: u32s(8, 1), BlockSize: 8, Keyable: 1}))
	if _, exact := rec.state(id); exact || tr.Mismatch(id) != 8 {
		t.Errorf("an engine block size of 8 for a pool of 4: exact %v, Mismatch() = %d", exact, tr.Mismatch(id))
	}
}
