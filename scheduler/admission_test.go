package scheduler

import (
	"math"
	"testing"
	"time"
)

func TestAheadFitSlope(t *testing.T) {
	ahead := func(i int) float64 { return float64(i%7) * 3000 }
	own := func(i int) float64 { return float64(i%5) * 1000 }
	tests := []struct {
		name      string
		n         int
		ttft      func(ahead, own float64) float64
		ahead     func(i int) float64
		slope, c  float64 // want, seconds per token
		cost      float64 // what the rule holds for
		tolerance float64
	}{
		// An engine that prefills requests in parallel: the work ahead does
		// not delay a request, its own prompt does.
		{"parallel", 400, func(_, u float64) float64 { return 0.03 + 2.5e-4*u }, ahead, 0, 2.5e-4, 0, 1e-9},
		// Parallel, slowed a little by the load (llm-d's simulator's time
		// factor): a token ahead costs a tenth of one's own, not held for.
		{"parallel under load", 400, func(a, u float64) float64 { return 0.03 + 2.5e-4*u + 2.5e-5*a }, ahead, 2.5e-5, 2.5e-4, 0, 1e-9},
		// A step-bound engine: every token, ahead or own, costs 1e-4 s.
		{"step-bound", 400, func(a, u float64) float64 { return 0.05 + 1e-4*(a+u) }, ahead, 1e-4, 1e-4, 1e-4, 1e-9},
		// Too few first tokens: no evidence, dispatch at once.
		{"few samples", 20, func(a, u float64) float64 { return 0.05 + 1e-4*(a+u) }, ahead, 0, 0, 0, 0},
		// Nothing was ever pending: not identified.
		{"no spread", 400, func(a, u float64) float64 { return 0.05 + 1e-4*(a+u) }, func(int) float64 { return 0 }, 0, 0, 0, 0},
		// Faster with more ahead (noise, batching luck): never negative.
		{"negative", 400, func(a, u float64) float64 { return 2 - 1e-4*a + 1e-4*u }, ahead, 0, 1e-4, 0, 1e-9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f aheadFit
			for i := range tt.n {
				a, u := tt.ahead(i), own(i)
				f.observe(a, 0, u, tt.ttft(a, u))
			}
			if got := f.slope(); math.Abs(got-tt.slope) > tt.tolerance {
				t.Errorf("slope() = %g, want %g", got, tt.slope)
			}
			if got := f.own(); math.Abs(got-tt.c) > tt.tolerance {
				t.Errorf("own() = %g, want %g", got, tt.c)
			}
			if got := f.cost(); math.Abs(got-tt.cost) > tt.tolerance {
				t.Errorf("cost() = %g, want %g", got, tt.cost)
			}
		})
	}
}

// A fit once identified stays while nothing is pending (the spread of the
// work ahead falls below the minimum), and bad observations are ignored.
func TestAheadFitKeepsSlope(t *testing.T) {
	var f aheadFit
	for i := range 400 {
		a, u := float64(i%5)*2000, float64(i%3)*1000
		f.observe(a, 0, u, 0.1+2e-4*(a+u))
	}
	want := f.slope()
	if math.Abs(want-2e-4) > 1e-9 {
		t.Fatalf("slope() = %g, want 2e-4", want)
	}
	for range 5000 {
		f.observe(0, 0, 1000, 0.3)
		f.observe(100, 0, 100, math.NaN())
		f.observe(-1, 0, 100, 5)
		f.observe(100, 0, -1, 5)
		f.observe(100, -1, 100, 5)
		f.observe(100, 0, 100, math.Inf(1))
	}
	if got := f.slope(); math.Abs(got-want) > 1e-6 {
		t.Errorf("slope() after unidentifiable observations = %g, want %g kept", got, want)
	}
}

// With several replicas the work ahead includes the others' pending
// prefill as they last reported it. On a step-bound engine a report seconds
// old flattens the slope on the whole of it to well under half the own
// cost, which would read the engine as parallel; the split fit, on this
// replica's work ahead apart from the others', still reads it as
// step-bound. An engine that prefills in parallel stays parallel when the
// others' work ahead moves with this replica's.
func TestAheadFitSplitsTheOthersStaleWork(t *testing.T) {
	local := func(i int) float64 { return float64(i%7) * 1000 }
	own := func(i int) float64 { return float64(i%5) * 1000 }
	remote := func(i int) float64 { return float64((i*3)%11) * 1500 } // what the others have pending
	liar := func(i int) float64 { return float64((i*7919)%10007) * 50 }
	tests := []struct {
		name     string
		ttft     func(i int) float64
		reported func(i int) float64 // what they last reported
		parallel bool
	}{
		{"step-bound, reports current", func(i int) float64 { return 0.05 + 1e-4*(local(i)+remote(i)+own(i)) }, remote, false},
		{"step-bound, reports stale", func(i int) float64 { return 0.05 + 1e-4*(local(i)+remote(i)+own(i)) },
			func(i int) float64 { return remote(i / 13 * 13) }, false},
		{"parallel, others' work moves with this replica's", func(i int) float64 { return 0.03 + 2.5e-4*own(i) + 2e-5*(local(i)+remote(i)) },
			func(i int) float64 { return 2*local(i) + remote(i/13*13)/4 }, true},
		// Another replica that reports whatever it likes (up to 500k
		// pending tokens, unrelated to what is there) moves a2, not a1.
		{"step-bound, the others' reports false", func(i int) float64 { return 0.05 + 1e-4*(local(i)+remote(i)+own(i)) }, liar, false},
		{"parallel, the others' reports false", func(i int) float64 { return 0.03 + 2.5e-4*own(i) + 2e-5*(local(i)+remote(i)) }, liar, true},
		{"one replica, step-bound", func(i int) float64 { return 0.05 + 1e-4*(local(i)+own(i)) }, func(int) float64 { return 0 }, false},
		{"one replica, parallel", func(i int) float64 { return 0.03 + 2.5e-4*own(i) }, func(int) float64 { return 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f aheadFit
			for i := range 1000 {
				f.observe(local(i), tt.reported(i), own(i), tt.ttft(i))
			}
			if got := f.parallel(); got != tt.parallel {
				t.Errorf("parallel() = %v, want %v (slope %g, own %g)", got, tt.parallel, f.slope(), f.own())
			}
		})
	}
}

func adaptive(t *testing.T, n int) (*Scheduler, *fakeClock) {
	t.Helper()
	return mustNew(t, Config{Policy: "least-loaded", Queue: QueueConfig{Adaptive: true}}, n)
}

// With nothing known about the engine, every request goes at once, where a
// fixed budget of 4,096 tokens holds all but the first two of 2,048 each.
func TestAdaptiveDispatchesAtOnceWithoutEvidence(t *testing.T) {
	for _, tt := range []struct {
		name   string
		queue  QueueConfig
		queued int
	}{
		{"adaptive", QueueConfig{Adaptive: true}, 0},
		{"budget 4096", QueueConfig{Budget: 4096}, 18},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: "least-loaded", Queue: tt.queue}, 1)
			for i := range 20 {
				route(t, s, req(prompt(uint64(i), uint64(i), 0, 4)))
			}
			if got := s.QueueLen(); got != tt.queued {
				t.Errorf("QueueLen() = %d, want %d", got, tt.queued)
			}
		})
	}
}

// An engine that reports waiting requests at its running limit gets no
// more until the router has seen as many of its requests complete there
// as were waiting, or the engine reports no queue.
func TestAdaptiveHoldsWhileEngineQueues(t *testing.T) {
	s, _ := adaptive(t, 1)
	id := pool(1)[0].ID
	var sent []*Request
	for i := range 18 {
		r := req(prompt(uint64(i), uint64(i), 0, 1))
		if d := route(t, s, r); d.Queued {
			t.Fatalf("request %d queued before the engine reported a queue", i)
		}
		sent = append(sent, r)
	}
	if err := s.SetEngineLoad(id, EngineLoad{Waiting: 2, Running: 16}); err != nil {
		t.Fatal(err)
	}
	if !state(s, id).EngineQueuing {
		t.Fatal("EngineQueuing = false after a report of 2 waiting at 16 running")
	}
	held := req(prompt(100, 100, 0, 1))
	if d := route(t, s, held); !d.Queued {
		t.Fatal("request dispatched to an engine that queues")
	}
	// Two completions let the two waiting requests in; the third frees a
	// slot for the held one.
	for k, r := range sent[:3] {
		s.FirstToken(r)
		s.Complete(r)
		if got, want := s.QueueLen(), 1; k < 2 && got != want {
			t.Errorf("after %d completions QueueLen() = %d, want %d", k+1, got, want)
		}
	}
	if got := s.QueueLen(); got != 0 {
		t.Errorf("after 3 completions QueueLen() = %d, want 0", got)
	}
	// A new report of a queue holds again; one without releases at the
	// next Tick.
	if err := s.SetEngineLoad(id, EngineLoad{Waiting: 1, Running: 16}); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(prompt(101, 101, 0, 1))); !d.Queued {
		t.Fatal("request dispatched to an engine that queues again")
	}
	if err := s.SetEngineLoad(id, EngineLoad{Waiting: 0, Running: 16}); err != nil {
		t.Fatal(err)
	}
	s.Tick()
	if got := s.QueueLen(); got != 0 {
		t.Errorf("after a report without a queue and a Tick, QueueLen() = %d, want 0", got)
	}
}

// With SetReplicas(3) each of this replica's completions stands for three
// of the pool's: an engine that reported 2 waiting has drained, as far as
// this replica can tell, after its first completion there (one replica
// would wait for three).
func TestEngineQueueDrainsForTheReplicasShare(t *testing.T) {
	for _, tt := range []struct {
		replicas, completions int
		queuing               bool
	}{
		{1, 2, true}, {1, 3, false}, {3, 0, true}, {3, 1, false},
	} {
		s, _ := adaptive(t, 1)
		s.SetReplicas(tt.replicas)
		id := pool(1)[0].ID
		var sent []*Request
		for i := range 4 {
			r := req(prompt(uint64(i), uint64(i), 0, 1))
			route(t, s, r)
			sent = append(sent, r)
		}
		if err := s.SetEngineLoad(id, EngineLoad{Waiting: 2, Running: 16}); err != nil {
			t.Fatal(err)
		}
		for _, r := range sent[:tt.completions] {
			s.FirstToken(r)
			s.Complete(r)
		}
		if got := state(s, id).EngineQueuing; got != tt.queuing {
			t.Errorf("%d replicas, %d completions since a report of 2 waiting: EngineQueuing = %v, want %v", tt.replicas, tt.completions, got, tt.queuing)
		}
	}
}

// Requests waiting in an engine below the most it was seen running with a
// queue wait for memory, not for a slot: the router does not hold them.
func TestAdaptiveEngineSlotsAreLearned(t *testing.T) {
	s, _ := adaptive(t, 1)
	id := pool(1)[0].ID
	route(t, s, req(prompt(1, 1, 0, 1)))
	for _, tt := range []struct {
		l       EngineLoad
		queuing bool
	}{
		{EngineLoad{Waiting: 0, Running: 40}, false}, // no queue
		{EngineLoad{Waiting: 3, Running: 40}, true},  // full at 40
		{EngineLoad{Waiting: 3, Running: 30}, false}, // 40 seen: a memory-bound queue
		{EngineLoad{Waiting: 0, Running: 50}, false}, // no queue
		{EngineLoad{Waiting: 1, Running: 45}, true},  // the most seen with a queue now
	} {
		if err := s.SetEngineLoad(id, tt.l); err != nil {
			t.Fatal(err)
		}
		if got := state(s, id).EngineQueuing; got != tt.queuing {
			t.Errorf("after %+v EngineQueuing = %v, want %v", tt.l, got, tt.queuing)
		}
	}
}

// On a step-bound engine (learned slope 1e-4 s per token ahead) the rule is
// a budget of SLOShare x SLO / slope = 0.625 s / 1e-4 = 6,250 tokens.
func TestAdaptiveHoldsOnStepBoundEngine(t *testing.T) {
	s, _ := adaptive(t, 1)
	teach(&s.est.ahead, 1e-4, 1e-4)
	var rs []*Request
	for i := range 4 {
		r := req(prompt(uint64(i), uint64(i), 0, 4)) // 2,048 uncached tokens
		d := route(t, s, r)
		if want := i == 3; d.Queued != want { // 6,144 + 2,048 > 6,250
			t.Errorf("request %d (pending %d) queued = %v, want %v", i, 2048*i, d.Queued, want)
		}
		rs = append(rs, r)
	}
	s.FirstToken(rs[0])
	if got := s.QueueLen(); got != 0 {
		t.Errorf("after a first token (pending 4,096) QueueLen() = %d, want 0", got)
	}
	if got := state(s, pool(1)[0].ID).AheadCost; math.Abs(got-1e-4) > 2e-6 {
		t.Errorf("AheadCost = %g, want about 1e-4", got)
	}
}

// A late request is dispatched to a busy instance whose work ahead costs
// nothing by the learned slope (an engine that prefills in parallel),
// where LateIdle under a fixed budget waits for no prefill pending.
func TestAdaptiveLateRequestOnParallelEngine(t *testing.T) {
	for _, tt := range []struct {
		name   string
		queue  QueueConfig
		queued bool
	}{
		{"adaptive", QueueConfig{Adaptive: true, MaxWait: time.Minute}, false},
		{"budget", QueueConfig{Budget: 1 << 20, MaxWait: time.Minute}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: "least-loaded", SLO: time.Second, Queue: tt.queue}, 1)
			route(t, s, req(prompt(1, 1, 0, 4)))
			// 40,000 uncached tokens: late at once (6.4 s of prefill at the prior cost).
			late := &Request{Blocks: prompt(2, 2, 0, 79), Tokens: 40_000}
			if d := route(t, s, late); d.Queued != tt.queued {
				t.Errorf("late request queued = %v, want %v", d.Queued, tt.queued)
			}
		})
	}
}

func TestAdaptiveConfigValidation(t *testing.T) {
	for _, tt := range []struct {
		name string
		q    QueueConfig
	}{
		{"budget and adaptive", QueueConfig{Adaptive: true, Budget: 10}},
		{"share above 1", QueueConfig{Adaptive: true, SLOShare: 1.5}},
		{"share negative", QueueConfig{Adaptive: true, SLOShare: -0.1}},
		{"share NaN", QueueConfig{Adaptive: true, SLOShare: math.NaN()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := (Config{Queue: tt.q}).Validate(); err == nil {
				t.Errorf("Validate(%+v) = nil, want an error", tt.q)
			}
		})
	}
}

// teach feeds f 400 first tokens from a step-bound engine: 0.05 s plus
// ahead seconds per token of work ahead (0 to 6,000 tokens) and own per
// token of the request's own (0 to 2,000).
func teach(f *aheadFit, ahead, own float64) {
	for i := range 400 {
		a, u := float64(i%7)*1000, float64(i%3)*1000
		f.observe(a, 0, u, 0.05+ahead*a+own*u)
	}
}

// Late requests on an engine that prefills in parallel are served as soon
// as nothing on time waits ahead of them, however busy the instance, and
// keep their prefix in the held blocks; on a step-bound engine they wait
// for fewer than IdleRunning in flight, and their prefix leaves the held
// blocks (held.go).
func TestLateServedOnAParallelEngine(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ahead    float64 // the fit's cost of a token of work ahead (own: 1e-4)
		dispatch bool
	}{
		{"parallel", 1e-6, true},
		{"step-bound", 1e-4, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := QueueConfig{Adaptive: true, MaxWait: time.Minute, IdleRunning: 8}
			s, _ := mustNew(t, Config{Policy: "cache-affinity", SLO: time.Second, Queue: q}, 1)
			teach(&s.est.ahead, tt.ahead, 1e-4)
			if got := s.est.ahead.parallel(); got != tt.dispatch {
				t.Fatalf("parallel() = %v after teaching %g ahead, want %v", got, tt.ahead, tt.dispatch)
			}
			id := pool(1)[0].ID
			setRunning(t, s, id, 10)
			late := req(prompt(2, 2, 0, 79))
			late.SLO = time.Millisecond // late at once
			if d := route(t, s, late); d.Queued == tt.dispatch {
				t.Errorf("late request with 10 in flight: queued %v, want %v", d.Queued, !tt.dispatch)
			}
			if tt.dispatch {
				return
			}
			if late.held != 0 {
				t.Errorf("late request held for an idle instance has %d blocks in the held index, want 0", late.held)
			}
		})
	}
}

// A late request held because its engine shows a queue keeps its prefix
// in the held blocks on a parallel engine: it goes at the next slot, and
// its group-mate follows it rather than prefilling the prefix elsewhere.
func TestLateKeepsItsPrefixOnAParallelEngine(t *testing.T) {
	q := QueueConfig{Adaptive: true, MaxWait: time.Minute, MaxRunning: 2}
	s, _ := mustNew(t, Config{Policy: "dualmap", Candidates: 2, SLO: time.Second, Queue: q}, 4)
	teach(&s.est.ahead, 1e-6, 1e-4)
	first := req(prompt(7, 1, 6, 8))
	first.SLO = time.Millisecond
	_, b := pairOf(t, s, first.Blocks)
	setRunning(t, s, b, 2)
	for _, in := range s.Instances() {
		if in.ID != b {
			setRunning(t, s, in.ID, 2)
		}
	}
	if d := route(t, s, first); !d.Queued {
		t.Fatalf("first of the group dispatched to %s with every instance at its MaxRunning, want it held", d.Instance)
	}
	if first.held == 0 {
		t.Error("a late request held on a parallel engine has no blocks in the held index")
	}
	mate := req(prompt(7, 2, 6, 8))
	if d := route(t, s, mate); d.Instance != first.dec.Instance || d.Reason != ReasonCache {
		t.Errorf("mate Submit() = %s (%v), want %s (cache): its group-mate is held there", d.Instance, d.Reason, first.dec.Instance)
	}
}
