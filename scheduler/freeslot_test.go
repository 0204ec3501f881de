package scheduler

import (
	"slices"
	"testing"
	"time"
)

// withFullHolder returns a scheduler over 8 instances whose engines run 4
// requests at once and hold each for svc seconds, and a prompt q of 8
// blocks (4,096 tokens) whose first 6 blocks are cached on b, a candidate
// of q, with running of the router's requests in flight on b. At the
// estimator's 1e-4 s a token, prefilling the 3,072 cached tokens again
// elsewhere costs about 0.31 s; a wait for b's first free slot costs svc x
// (running - 3) / 4.
func withFullHolder(t *testing.T, params Params, svc float64, running, ahead int) (*Scheduler, []uint64, string) {
	t.Helper()
	cfg := pairConfig(params)
	cfg.Cost.MaxSeqs, cfg.Cost.ServiceTime = 4, svc
	s, _ := mustNew(t, cfg, 8)
	q := prompt(21, 2, 6, 8)
	_, b := pairOf(t, s, q)
	if err := s.AddCached(b, prompt(21, 1, 6, 8)); err != nil {
		t.Fatal(err)
	}
	setRunning(t, s, b, running)
	loadInstance(t, s, b, ahead)
	fitParallel(t, s, 1e-6)
	return s, q, b
}

// fitParallel teaches s's admission fit an engine on which a token of a
// request's own prompt costs 1e-4 s (the estimator's cost: reprice adds
// nothing) and one of the work ahead costs ahead seconds: below half of
// that, an engine that prefills requests in parallel.
func fitParallel(t *testing.T, s *Scheduler, ahead float64) {
	t.Helper()
	for i := range 200 {
		o, a := float64(100+37*(i%50)), float64(3000*(i%7))
		s.est.ahead.observe(a, 0, o, 0.03+1e-4*o+ahead*a)
	}
	if got := s.est.ahead.own(); got < 0.9e-4 || got > 1.1e-4 {
		t.Fatalf("fitted own cost %g, want about 1e-4", got)
	}
}

// setRunning sets the router's requests in flight on id.
func setRunning(t *testing.T, s *Scheduler, id string, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	in.running.add(n - in.running.get())
}

func TestFullEngineSendsToAFreeSlot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		params  Params
		svc     float64
		running int
		ahead   int  // prefill tokens ahead on the holder
		free    bool // a free slot elsewhere wins
	}{
		// 4 of 4 slots taken: the first frees in 4/4 = 1 s, more than
		// the 0.31 s of prefilling the prefix again.
		{"full, a long wait", nil, 4, 4, 0, true},
		{"full, a longer wait", nil, 4, 6, 0, true},
		// The wait, 0.25 s, costs less than the prefix: it stays.
		{"full, a short wait", nil, 1, 4, 0, false},
		// 3 of 4: a slot is free on the holder itself. Its 0.5 s of work
		// ahead make a cold idle instance's estimate lower, but that is
		// the cache-first choice's to weigh (headroom), not this rule's.
		{"not full", nil, 4, 3, 5000, false},
		{"reach 0", Params{"reach": 0}, 4, 4, 0, false},
		{"a step-bound engine", nil, 4, 4, 0, false},
		{"pool larger than reach", Params{"reach": 4}, 4, 4, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, q, b := withFullHolder(t, tc.params, tc.svc, tc.running, tc.ahead)
			if tc.name == "a step-bound engine" {
				// A token of work ahead costs what one's own does: a
				// second prefill of the prefix would take step budget
				// from every request on the free instance, which the
				// request's own estimate does not weigh.
				fitParallel(t, s, 1e-4)
			}
			d := route(t, s, req(q))
			if !tc.free {
				if d.Instance != b || d.Reason == ReasonSlot {
					t.Fatalf("Submit() = %s (%v), want the holder %s", d.Instance, d.Reason, b)
				}
				return
			}
			if d.Instance == b || d.Reason != ReasonSlot || d.Fallback != b {
				t.Fatalf("Submit() = %s (%v, fallback %s), want a free slot elsewhere, falling back to the holder %s", d.Instance, d.Reason, d.Fallback, b)
			}
			if st := state(s, d.Instance); st.Running != 1 {
				t.Fatalf("%s had %d in flight before this one, want none", d.Instance, st.Running-1)
			}
		})
	}
	if !slices.Contains(reasonNames[:], "slot") || ReasonSlot.String() != "slot" {
		t.Errorf("ReasonSlot.String() = %q", ReasonSlot.String())
	}
}

func TestFreeSlotSkipsFullAndQueuingInstances(t *testing.T) {
	// Every other instance is full too, with a shorter wait than the
	// holder's (1 s against 3 s), but for one whose router queue holds a
	// request: nothing has a free slot to give, and the request stays with
	// its prefix.
	s, q, b := withFullHolder(t, nil, 4, 6, 0)
	var queuing string
	for _, in := range s.Instances() {
		switch {
		case in.ID == b:
		case queuing == "":
			queuing = in.ID
			s.mu.Lock()
			s.byID[in.ID].nqueued.add(1)
			s.mu.Unlock()
		default:
			setRunning(t, s, in.ID, 4)
		}
	}
	if d := route(t, s, req(q)); d.Instance != b || d.Reason == ReasonSlot {
		t.Fatalf("Submit() = %s (%v), want the holder %s: no instance has a free slot and an empty queue", d.Instance, d.Reason, b)
	}
	// Once the queue is empty, its free slot wins.
	s.mu.Lock()
	s.byID[queuing].nqueued.add(-1)
	s.mu.Unlock()
	if d := route(t, s, req(q)); d.Instance != queuing || d.Reason != ReasonSlot {
		t.Fatalf("Submit() = %s (%v), want %s, the one free slot", d.Instance, d.Reason, queuing)
	}
}

func TestFreeSlotPrefersTheLowerEstimate(t *testing.T) {
	// Free instances, idle and cold, and one outside q's pair with work
	// ahead that holds the prefix too. The lower estimate wins, not the
	// first found.
	s, q, _ := withFullHolder(t, nil, 8, 4, 0)
	warm := outsider(t, s, q)
	if err := s.AddCached(warm, prompt(21, 1, 6, 8)); err != nil {
		t.Fatal(err)
	}
	loadInstance(t, s, warm, 1000) // 0.1 s ahead, less than 0.31 s of prefix
	if d := route(t, s, req(q)); d.Instance != warm || d.Reason != ReasonSlot {
		t.Fatalf("Submit() = %s (%v), want %s: a free slot with the prefix", d.Instance, d.Reason, warm)
	}
	r := req(q)
	if a := testing.AllocsPerRun(200, func() { _, _ = s.Pick(r) }); a != 0 {
		t.Fatalf("Pick() with a full holder allocates %v times", a)
	}
}

// A limit-only report that shows a queue asks for the next one as soon as
// the queue can have lasted slotConfirm; once the limit is known, or
// without a queue, it asks for nothing.
func TestConfirmIn(t *testing.T) {
	s, clk := mustNew(t, Config{Policy: "round-robin"}, 2)
	ids := []string{s.Instances()[0].ID, s.Instances()[1].ID}
	report := func(id string, w, r int) time.Duration {
		t.Helper()
		d, err := s.SetEngineLimit(id, EngineLoad{Waiting: w, Running: r})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := report(ids[0], 0, 3); d != 0 {
		t.Fatalf("no queue: confirm in %v, want 0", d)
	}
	if d := report(ids[0], 2, 16); d != slotConfirm {
		t.Fatalf("a new queue: confirm in %v, want %v", d, slotConfirm)
	}
	clk.Advance(100 * time.Millisecond)
	if d := report(ids[0], 2, 16); d != slotConfirm-100*time.Millisecond {
		t.Fatalf("the queue 100ms on: confirm in %v, want %v", d, slotConfirm-100*time.Millisecond)
	}
	clk.Advance(slotConfirm)
	if d := report(ids[0], 2, 16); d != 0 || state(s, ids[0]).SlotLimit != 16 {
		t.Fatalf("a lasting queue: confirm in %v, limit %d; want 0 and 16", d, state(s, ids[0]).SlotLimit)
	}
	// The other instance takes the pool's limit: its queue has nothing
	// to teach unless more run there.
	if d := report(ids[1], 1, 16); d != 0 {
		t.Fatalf("the pool's limit holds: confirm in %v, want 0", d)
	}
	if d := report(ids[1], 1, 20); d != slotConfirm {
		t.Fatalf("more running than the pool's limit: confirm in %v, want %v", d, slotConfirm)
	}
}

func TestFreeSlotLeavesASlotPerReplica(t *testing.T) {
	// Every other instance runs 2 of its 4. With three replicas each may
	// see the same free slots at once: 2 in flight and one for each of
	// the two others fill an instance, and the request stays. With two
	// replicas one slot is left, and it goes there.
	s, q, b := withFullHolder(t, nil, 4, 4, 0)
	for _, in := range s.Instances() {
		if in.ID != b {
			setRunning(t, s, in.ID, 2)
		}
	}
	s.SetReplicas(3)
	if d := route(t, s, req(q)); d.Instance != b || d.Reason == ReasonSlot {
		t.Fatalf("3 replicas: Submit() = %s (%v), want the holder %s", d.Instance, d.Reason, b)
	}
	s.SetReplicas(2)
	if d := route(t, s, req(q)); d.Instance == b || d.Reason != ReasonSlot {
		t.Fatalf("2 replicas: Submit() = %s (%v), want a free slot", d.Instance, d.Reason)
	}
}

func TestFreeSlotPricesTheSecondPrefill(t *testing.T) {
	// A token of work ahead costs 4e-5 s, 0.4 of one's own: still an
	// engine that prefills in parallel, but the 4,096 tokens the request
	// would prefill on a free instance delay each request in prefill
	// there by 0.16 s. With nothing in prefill there it goes (0.41 + 0.16
	// s against the holder's 1.1 s); with eight requests in prefill on
	// every free instance the delay to them outweighs the wait, and it
	// stays.
	for _, tc := range []struct {
		prefilling int
		free       bool
	}{{0, true}, {8, false}} {
		s, q, b := withFullHolder(t, nil, 4, 4, 0)
		fitParallel(t, s, 4e-5)
		s.mu.Lock()
		for id, in := range s.byID {
			if id != b {
				in.prefilling.add(tc.prefilling)
			}
		}
		s.mu.Unlock()
		if d := route(t, s, req(q)); (d.Reason == ReasonSlot) != tc.free {
			t.Fatalf("%d in prefill elsewhere: Submit() = %s (%v), free slot taken %v, want %v", tc.prefilling, d.Instance, d.Reason, d.Reason == ReasonSlot, tc.free)
		}
	}
}

func TestFreeSlotFalseRemoteClaims(t *testing.T) {
	// Attacker: another replica claims a queued request and running ones
	// on every instance. It can take free slots away (the choice is then
	// the candidates', as before the rule), never make an instance it
	// claims full or queuing take a request for a free slot.
	s, q, _ := withFullHolder(t, nil, 4, 4, 0)
	for _, in := range s.Instances() {
		if err := s.SetRemoteLoad(in.ID, Load{Queued: 1, Running: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if d := route(t, s, req(q)); d.Reason == ReasonSlot {
			t.Fatalf("Submit() = %s (slot), want no free slot: every instance claims a queue", d.Instance)
		}
	}
	// Claims of running requests alone fill the instances they name.
	for _, in := range s.Instances() {
		if err := s.SetRemoteLoad(in.ID, Load{Running: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if d := route(t, s, req(q)); d.Reason == ReasonSlot {
		t.Fatalf("Submit() = %s (slot), want no free slot: the claims fill every instance", d.Instance)
	}
}
