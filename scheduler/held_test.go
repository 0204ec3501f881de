package scheduler

import (
	"math/rand/v2"
	"testing"
	"time"
)

// heldPair returns a two-instance scheduler whose instances both have
// prefill pending past a 4,096-token budget, so the next requests are held
// in the router queue.
func heldPair(t *testing.T, held string, hotspot int) (*Scheduler, []*Request) {
	t.Helper()
	cfg := Config{
		Candidates: 2,
		Cost:       CostConfig{PerToken: 1e-4, LearnRate: -1},
		Queue:      QueueConfig{Budget: 4096, Held: held},
		Rebalance:  RebalanceConfig{OldestWait: -1, PendingTokens: hotspot},
	}
	s, _ := mustNew(t, cfg, 2)
	var fill []*Request
	for i := range 2 {
		r := req(prompt(900+uint64(i), 900+uint64(i), 0, 8))
		if d := route(t, s, r); d.Queued {
			t.Fatalf("filler %d queued, want it dispatched", i)
		}
		fill = append(fill, r)
	}
	for _, st := range s.Instances() {
		if st.PendingTokens == 0 {
			t.Fatalf("instance %s has nothing pending after the fillers", st.ID)
		}
	}
	return s, fill
}

// checkHeld compares every instance's held index with the blocks of the
// requests in its queue.
func checkHeld(t *testing.T, s *Scheduler) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.members {
		in.mu.Lock()
		want := map[uint64]int32{}
		for _, r := range in.queue {
			for _, b := range r.Blocks[:r.held] {
				want[b]++
			}
		}
		if in.held.len() != len(want) {
			t.Errorf("%s: held index has %d blocks, its queue %d", in.ID, in.held.len(), len(want))
		}
		for b, n := range want {
			if got, _ := in.held.refs.get(b); got != n {
				t.Errorf("%s: block %x held %d times, its queue has it %d times", in.ID, b, got, n)
				break
			}
		}
		in.mu.Unlock()
	}
}

// A request held in the router queue is found by the cache lookup of its
// group-mate, which follows it to the same instance.
func TestHeldGroupMateFollows(t *testing.T) {
	for _, tc := range []struct {
		held       string
		same       bool
		wantReason Reason
	}{
		{HeldOn, true, ReasonCache},
		{HeldEstimate, true, ReasonCache},
		{HeldSplit, true, ReasonCache},
		{HeldOff, false, ReasonTie}, // the scheduler before held.go: the group splits
	} {
		t.Run(tc.held, func(t *testing.T) {
			s, _ := heldPair(t, tc.held, 0)
			first := req(prompt(7, 1, 6, 8))
			if d := route(t, s, first); !d.Queued {
				t.Fatalf("first of the group dispatched at once, want it held")
			}
			mate := req(prompt(7, 2, 6, 8))
			d := route(t, s, mate)
			if same := d.Instance == first.dec.Instance; same != tc.same {
				t.Errorf("mate Submit() = %s (%v), first is held at %s; same instance = %v, want %v", d.Instance, d.Reason, first.dec.Instance, same, tc.same)
			}
			if d.Reason != tc.wantReason {
				t.Errorf("mate Submit() reason = %v, want %v", d.Reason, tc.wantReason)
			}
			wantCached := 0 // the held prefix is still the mate's own work ...
			if tc.held == HeldEstimate {
				wantCached = 6 * 512 // ... unless it counts for the estimate too
			}
			if d.CachedTokens != wantCached {
				t.Errorf("mate Submit() CachedTokens = %d, want %d", d.CachedTokens, wantCached)
			}
			checkHeld(t, s)
		})
	}
}

// Pick, the policies' read path, sees held blocks without allocating.
func TestHeldPickDoesNotAllocate(t *testing.T) {
	s, _ := heldPair(t, HeldOn, 0)
	first := req(prompt(7, 1, 6, 8))
	route(t, s, first)
	mate := req(prompt(7, 2, 6, 8))
	d, err := s.Pick(mate)
	if err != nil || d.Instance != first.dec.Instance || d.Reason != ReasonCache {
		t.Fatalf("Pick() = %+v, %v; want %s for its held prefix", d, err, first.dec.Instance)
	}
	if a := testing.AllocsPerRun(200, func() { _, _ = s.Pick(mate) }); a != 0 {
		t.Errorf("Pick() allocates %v times with held requests, want 0", a)
	}
}

// Held blocks leave the index with their request, whichever way it leaves
// the queue, and a dispatched request's blocks are found in the cache index
// instead.
func TestHeldReleased(t *testing.T) {
	heldAt := func(s *Scheduler, r *Request) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, in := range s.members {
			in.mu.Lock()
			n = max(n, in.held.heldBlocks(r.Blocks))
			in.mu.Unlock()
		}
		return n
	}
	cases := []struct {
		name  string
		leave func(t *testing.T, s *Scheduler, clk *fakeClock, fill []*Request, r *Request)
	}{
		{"cancel", func(t *testing.T, s *Scheduler, _ *fakeClock, _ []*Request, r *Request) { s.Cancel(r) }},
		{"dispatch", func(t *testing.T, s *Scheduler, _ *fakeClock, fill []*Request, r *Request) {
			for _, f := range fill {
				s.FirstToken(f)
			}
			if r.state != stateDispatched {
				t.Fatalf("held request not dispatched once the fillers prefilled (state %d)", r.state)
			}
		}},
		{"expire", func(t *testing.T, s *Scheduler, clk *fakeClock, _ []*Request, r *Request) {
			clk.Advance(2 * time.Second)
			s.Tick()
			if r.state != stateDone {
				t.Fatalf("held request not expired (state %d)", r.state)
			}
		}},
		{"reroute", func(t *testing.T, s *Scheduler, _ *fakeClock, _ []*Request, r *Request) {
			var keep []Instance
			for _, in := range pool(2) {
				if in.ID != r.dec.Instance {
					keep = append(keep, in)
				}
			}
			if err := s.SetInstances(keep); err != nil {
				t.Fatal(err)
			}
			if r.dec.Reason != ReasonRerouted {
				t.Fatalf("held request reason %v after its instance left, want rerouted", r.dec.Reason)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				Candidates: 2,
				Cost:       CostConfig{PerToken: 1e-4, LearnRate: -1},
				Queue:      QueueConfig{Budget: 4096, MaxWait: time.Second},
				Rebalance:  RebalanceConfig{OldestWait: -1},
			}
			s, clk := mustNew(t, cfg, 2)
			var fill []*Request
			for i := range 2 {
				f := req(prompt(900+uint64(i), 900+uint64(i), 0, 8))
				route(t, s, f)
				fill = append(fill, f)
			}
			r := req(prompt(7, 1, 6, 8))
			if d := route(t, s, r); !d.Queued {
				t.Fatal("request dispatched at once, want it held")
			}
			if n := heldAt(s, r); n != 8 {
				t.Fatalf("held index has %d of the held request's blocks, want 8", n)
			}
			tc.leave(t, s, clk, fill, r)
			checkHeld(t, s)
			if r.state == stateQueued { // re-routed: held at its new instance
				if n := heldAt(s, r); n != 8 {
					t.Errorf("re-routed request: %d of its blocks held at its new instance, want 8", n)
				}
				return
			}
			if n := heldAt(s, r); n != 0 {
				t.Errorf("after %s: %d of its blocks still held, want 0", tc.name, n)
			}
			mate := req(prompt(7, 2, 6, 8))
			d, err := s.Pick(mate)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if r.state == stateDispatched {
				want = 6 * 512 // now in the cache index
			}
			if d.CachedTokens != want {
				t.Errorf("after %s: mate's Pick() CachedTokens = %d, want %d", tc.name, d.CachedTokens, want)
			}
		})
	}
}

// A migrated request's blocks move with it.
func TestHeldMigrates(t *testing.T) {
	s, hot, reqs := hotspot(t, RebalanceConfig{OldestWait: -1}, 40)
	moves := s.Plan()
	if len(moves) == 0 {
		t.Fatal("Plan() = no moves for a hotspot")
	}
	if n := s.Apply(moves); n == 0 {
		t.Fatal("Apply() made no moves")
	}
	checkHeld(t, s)
	moved := moves[0].Request
	s.mu.Lock()
	in := s.byID[moves[0].To]
	s.mu.Unlock()
	in.mu.Lock()
	got := in.held.heldBlocks(moved.Blocks)
	in.mu.Unlock()
	if moved.state == stateQueued && got != len(moved.Blocks) {
		t.Errorf("migrated request: %d of its %d blocks held at %s, want all", got, len(moved.Blocks), moves[0].To)
	}
	for _, r := range reqs {
		s.Cancel(r)
	}
	checkHeld(t, s)
	if st := state(s, hot); st.Queued != 0 {
		t.Errorf("hot instance still queues %d", st.Queued)
	}
}

// The rebalancer does not move a held request away from its group's other
// held requests to an instance without their prefix while it can make its
// SLO where it is (HeldOn, HeldEstimate); HeldSplit moves it.
func TestHeldRebalanceKeepsGroups(t *testing.T) {
	for _, tc := range []struct {
		held  string
		moves bool
	}{{HeldOn, false}, {HeldEstimate, false}, {HeldSplit, true}} {
		t.Run(tc.held, func(t *testing.T) {
			s, _ := heldPair(t, tc.held, 2000)
			var group []*Request
			for i := range 4 { // 4 x 6 blocks, 4 of them shared: about 1 s of work, within the 5 s SLO
				r := req(prompt(42, uint64(i), 4, 6))
				route(t, s, r)
				group = append(group, r)
			}
			for _, r := range group[1:] {
				if r.inst != group[0].inst || !r.dec.Queued {
					t.Fatalf("group member at %s (queued %v), want all held at %s", r.dec.Instance, r.dec.Queued, group[0].dec.Instance)
				}
			}
			moves := s.Plan()
			if got := len(moves) > 0; got != tc.moves {
				t.Errorf("Plan() = %d moves, want moves: %v", len(moves), tc.moves)
			}
			s.Apply(moves)
			checkHeld(t, s)
		})
	}
	// A prefix the source has cached already does not hold its group
	// there: the move's benefit counts the prefill it costs.
	s, fill := heldPair(t, HeldOn, 2000)
	warm := req(prompt(42, 100, 4, 6))
	route(t, s, warm)
	for _, f := range fill {
		s.FirstToken(f)
	}
	s.FirstToken(warm)
	for i := range 8 {
		route(t, s, req(prompt(42, uint64(i), 4, 6)))
	}
	if st := state0(s); st.Queued == 0 {
		t.Fatal("nothing held after the cached group's requests")
	}
	if moves := s.Plan(); len(moves) == 0 {
		t.Error("Plan() = no moves of a group whose prefix the source has cached")
	}
}

// state0 returns the instance with the most requests queued.
func state0(s *Scheduler) InstanceState {
	var best InstanceState
	for _, st := range s.Instances() {
		if st.Queued > best.Queued {
			best = st
		}
	}
	return best
}

// The held index is bounded by the instance's cache capacity and empty
// once every request left, after a long random run through every path
// (dispatch, first token, completion, cancellation, expiry, migration).
func TestHeldNoLeak(t *testing.T) {
	cfg := Config{
		CacheTokens: 64 * 512,
		Queue:       QueueConfig{Budget: 3000, MaxWait: 300 * time.Millisecond},
		Rebalance:   RebalanceConfig{OldestWait: 50 * time.Millisecond, PendingTokens: 2000},
	}
	s, clk := mustNew(t, cfg, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []*Request
	maxHeld := 0
	for i := range 5000 {
		r := req(prompt(uint64(rng.IntN(20)), uint64(i), rng.IntN(6), 2+rng.IntN(12)))
		if _, err := s.Submit(r, recorder(s)); err == nil {
			live = append(live, r)
		}
		clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
		for k := rng.IntN(3); k > 0 && len(live) > 0; k-- {
			j := rng.IntN(len(live))
			r := live[j]
			switch rng.IntN(4) {
			case 0:
				s.Cancel(r)
			case 1:
				s.FirstToken(r)
				continue
			default:
				s.FirstToken(r)
				s.Complete(r)
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		if i%10 == 0 {
			s.Tick()
		}
		if i%500 == 0 {
			checkHeld(t, s)
		}
		s.mu.Lock()
		for _, in := range s.members {
			in.mu.Lock()
			maxHeld = max(maxHeld, in.held.len())
			if in.held.len() > in.kv.capacity {
				t.Fatalf("%s holds %d blocks, over its capacity of %d", in.ID, in.held.len(), in.kv.capacity)
			}
			in.mu.Unlock()
		}
		s.mu.Unlock()
	}
	if maxHeld == 0 {
		t.Fatal("nothing was ever held: the run does not test the held index")
	}
	for _, r := range live {
		s.Cancel(r)
	}
	checkHeld(t, s)
	for _, st := range s.Instances() {
		if st.Queued != 0 {
			t.Errorf("%s still queues %d", st.ID, st.Queued)
		}
	}
	t.Logf("most blocks held on one instance: %d (capacity 64); %+v", maxHeld, s.Stats())
}

func TestHeldIndexBound(t *testing.T) {
	var h heldIndex
	a := prompt(1, 1, 4, 8)
	b := prompt(1, 2, 4, 8)
	if n := h.add(a, 10); n != 8 {
		t.Fatalf("add(a) = %d, want 8", n)
	}
	if n := h.add(b, 10); n != 6 { // 4 shared blocks, then room for 2 of its own
		t.Fatalf("add(b) = %d, want 6", n)
	}
	if got := h.heldBlocks(b); got != 6 {
		t.Errorf("heldBlocks(b) = %d, want 6", got)
	}
	if got := h.sharedBlocks(a); got != 4 {
		t.Errorf("sharedBlocks(a) = %d, want 4", got)
	}
	h.remove(a)
	if got := h.heldBlocks(a); got != 4 {
		t.Errorf("heldBlocks(a) after its removal = %d, want 4 (b's share)", got)
	}
	h.remove(b[:6])
	if h.len() != 0 {
		t.Errorf("len() = %d after every removal, want 0", h.len())
	}
	for i := range 100 {
		p := prompt(uint64(i), uint64(i), 0, 8)
		h.add(p, 1<<20)
		h.remove(p)
	}
	if h.len() != 0 {
		t.Errorf("len() = %d after 100 adds and removes, want 0", h.len())
	}
	if testing.AllocsPerRun(100, func() { h.heldBlocks(a) }) != 0 {
		t.Error("heldBlocks allocates")
	}
}

// A late request waits behind every request that can still make its SLO:
// its blocks leave the held index, and its group-mate does not follow it.
func TestHeldLateDoesNotCount(t *testing.T) {
	s, _ := heldPair(t, HeldOn, 0)
	first := req(prompt(7, 1, 6, 8))
	first.SLO = time.Millisecond // late at once: its own prefill takes longer
	if d := route(t, s, first); !d.Queued {
		t.Fatal("late request dispatched at once, want it held for an idle instance")
	}
	checkHeld(t, s)
	if first.held != 0 {
		t.Errorf("late request has %d blocks in the held index, want 0", first.held)
	}
	mate := req(prompt(7, 2, 6, 8))
	if d := route(t, s, mate); d.Reason != ReasonTie {
		t.Errorf("mate of a late request: Submit() reason = %v at %s, want tie", d.Reason, d.Instance)
	}
	checkHeld(t, s)
}

// With the engine's own cache report (exact mode, KV events) held blocks
// still count: they are the router's own fact, which no engine reports.
func TestHeldCountsInExactMode(t *testing.T) {
	s, _ := heldPair(t, HeldOn, 0)
	for _, in := range pool(2) {
		if err := s.SetExact(in.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	first := req(prompt(7, 1, 6, 8))
	if d := route(t, s, first); !d.Queued {
		t.Fatal("first of the group dispatched at once, want it held")
	}
	mate := req(prompt(7, 2, 6, 8))
	if d := route(t, s, mate); d.Instance != first.dec.Instance || d.Reason != ReasonCache {
		t.Errorf("mate Submit() = %s (%v), want %s (cache): its group-mate is held there", d.Instance, d.Reason, first.dec.Instance)
	}
}
