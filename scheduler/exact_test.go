package scheduler

import (
	"errors"
	"testing"
	"time"
)

// In the exact view a dispatch adds nothing to the index: only the
// engine's reports (AddCached) and removals (RemoveCached) change it, and
// turning the view off lets dispatches predict again.
func TestExactView(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity"}, 8)
	p := prompt(3, 3, 6, 8)
	first := route(t, s, req(p)).Instance
	if err := s.ClearCached(first); err != nil {
		t.Fatal(err)
	}
	if err := s.SetExact(first, true); err != nil {
		t.Fatal(err)
	}
	if !state(s, first).ExactCache {
		t.Errorf("Instances() says %s's view is predicted after SetExact(true)", first)
	}
	if d := route(t, s, req(p)); d.CachedTokens != 0 {
		t.Errorf("exact view, nothing reported: %d tokens cached on %s, want 0", d.CachedTokens, d.Instance)
	}
	if n := state(s, first).CachedBlocks; n != 0 {
		t.Errorf("exact view: a dispatch left %d blocks in the index, want 0", n)
	}
	if err := s.AddCached(first, p); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(p)); d.Instance != first || d.CachedTokens != 8*512 {
		t.Errorf("after the engine's report: %s with %d cached, want %s with %d", d.Instance, d.CachedTokens, first, 8*512)
	}
	// The engine evicts blocks 4 to 7: the prefix shrinks to 4 blocks.
	if err := s.RemoveCached(first, p[4:]); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(p)); d.Instance != first || d.CachedTokens != 4*512 {
		t.Errorf("after removing 4 blocks: %s with %d cached, want %s with %d", d.Instance, d.CachedTokens, first, 4*512)
	}
	if err := s.RemoveCached(first, p); err != nil {
		t.Fatal(err)
	}
	if n := state(s, first).CachedBlocks; n != 0 {
		t.Errorf("after removing every block: %d left, want 0", n)
	}
	// Back to the prediction: a dispatch fills the index again.
	if err := s.SetExact(first, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCached(first, p[:1]); err != nil {
		t.Fatal(err)
	}
	route(t, s, req(p))
	if n := state(s, first).CachedBlocks; n != len(p) {
		t.Errorf("predicted view: %d blocks after a dispatch, want %d", n, len(p))
	}
	for name, err := range map[string]error{"SetExact": s.SetExact("nope", true), "RemoveCached": s.RemoveCached("nope", p), "ClearCached": s.ClearCached("nope")} {
		if !errors.Is(err, ErrUnknownInstance) {
			t.Errorf("%s(unknown) = %v, want ErrUnknownInstance", name, err)
		}
	}
}

// Another replica's dispatch does not enter an exact index either.
func TestExactIgnoresRecordCached(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity"}, 2)
	id := pool(2)[0].ID
	if err := s.SetExact(id, true); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCached(id, prompt(1, 1, 4, 4), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := state(s, id).CachedBlocks; n != 0 {
		t.Errorf("RecordCached on an exact view: %d blocks, want 0", n)
	}
}

// The index's own removal and clearing keep its invariants: a removed
// block's node is reused, and a cleared index fills again to capacity.
func TestKVIndexRemoveClear(t *testing.T) {
	kv := newKVIndex(4)
	p := prompt(1, 1, 4, 4)
	kv.add(p)
	kv.remove(p[3])
	kv.remove(p[3]) // twice: no-op
	if n, c := kv.len(), kv.cachedBlocks(p); n != 3 || c != 3 {
		t.Errorf("after remove: len %d cached %d, want 3 3", n, c)
	}
	kv.add(p)
	if n := len(kv.nodes); n != 5 {
		t.Errorf("nodes = %d after re-adding a removed block, want 5 (its node reused)", n)
	}
	kv.clear()
	if n, c := kv.len(), kv.cachedBlocks(p); n != 0 || c != 0 {
		t.Errorf("after clear: len %d cached %d, want 0 0", n, c)
	}
	q := prompt(2, 2, 6, 6)
	kv.add(q)
	if n, c := kv.len(), kv.cachedBlocks(q); n != 4 || c != 4 {
		t.Errorf("after clear and add of 6: len %d cached %d, want 4 4", n, c)
	}
}
