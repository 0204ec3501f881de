package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// victimWait saturates one instance with cache-rich requests and returns
// how long a zero-hit request that arrives in the middle waits before it is
// dispatched (or the give-up time if it never is), and how many requests
// were queued when it arrived. Each step (victimStep) two requests arrive
// and one is served.
func victimWait(t *testing.T, aging float64) (wait time.Duration, ahead int) {
	cfg := Config{
		Policy: "cache-affinity",
		Queue:  QueueConfig{Budget: 1000, AgingRate: aging, Order: OrderCache},
	}
	s, clk := mustNew(t, cfg, 1)
	var out outcome
	var inflight []*Request
	shared := prompt(1, 0, 3, 4)
	warmReq := req(shared) // warms the shared prefix
	route(t, s, warmReq)
	inflight = append(inflight, warmReq)
	var victim *Request
	var victimAt time.Duration
	const step = victimStep
	for tick := 0; tick < 400; tick++ {
		now := time.Duration(tick) * step
		// Two arrivals per step, one service per step: saturated.
		for k := 0; k < 2; k++ {
			if _, err := s.Submit(req(prompt(1, uint64(tick*2+k+1), 3, 4)), &out); err != nil {
				t.Fatal(err)
			}
		}
		if tick == 20 {
			ahead = s.QueueLen()
			victim = req(prompt(999, 999, 0, 4))
			victimAt = now
			if _, err := s.Submit(victim, &out); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range out.sent {
			if d.Request == victim {
				return now - victimAt, ahead
			}
			inflight = append(inflight, d.Request)
		}
		out.reset()
		clk.Advance(step)
		if len(inflight) > 0 {
			r := inflight[0]
			inflight = inflight[1:]
			s.FirstToken(r)
			s.Complete(r)
		}
	}
	return 400 * step, ahead
}

const victimStep = 100 * time.Millisecond

// A zero-hit request waits behind the requests queued before it and behind
// the newcomers that arrive less than (their cached tokens / AgingRate)
// after it, no more: the aging rate sets the wait, to the step.
func TestQueueAgingBoundsWait(t *testing.T) {
	const cached = 3 * 512 // the newcomers' shared prefix
	for _, aging := range []float64{1024, 2048, 4096, 8192} {
		t.Run(fmt.Sprint(aging), func(t *testing.T) {
			wait, ahead := victimWait(t, aging)
			// Newcomers arrive two a step from the victim's step on; those
			// of the next k steps outrank it for good while k steps of aging
			// are worth less than their cached prefix.
			k := 0
			for float64(k+1)*victimStep.Seconds()*aging < cached {
				k++
			}
			want := time.Duration(ahead+2*k+1) * victimStep // +1: its own service step
			t.Logf("aging %g: waited %v behind %d queued and %d newcomers, want %v", aging, wait, ahead, 2*k, want)
			if wait < want-victimStep/2 || wait > want+victimStep/2 {
				t.Errorf("wait with aging %g = %v, want %v ± %v", aging, wait, want, victimStep/2)
			}
		})
	}
	// Without aging the newcomers' cache keeps it waiting to the end.
	if without, _ := victimWait(t, 1e-9); without < 30*time.Second {
		t.Errorf("wait without aging = %v; the test no longer shows starvation", without)
	}
}

// The budget is per instance, not per replica: prefill other replicas
// reported pending counts against it.
func TestQueueBudgetCountsOtherReplicas(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 2500}}
	s, _ := mustNew(t, cfg, 1)
	id := pool(1)[0].ID
	var out outcome
	if err := s.SetRemoteLoad(id, Load{PendingTokens: 1000, Running: 1}); err != nil {
		t.Fatal(err)
	}
	r := req(prompt(1, 1, 0, 4)) // 2048 uncached + 1000 remote > 2500: waits
	if d, _ := s.Submit(r, &out); !d.Queued {
		t.Fatalf("request dispatched with 1000 tokens pending from other replicas, want queued (over budget)")
	}
	s.Tick()
	if len(out.sent) != 0 {
		t.Fatalf("Tick dispatched %d requests while the remote prefill is still pending", len(out.sent))
	}
	if err := s.SetRemoteLoad(id, Load{PendingTokens: 400, Running: 1}); err != nil {
		t.Fatal(err)
	}
	s.Tick() // 400 + 2048 <= 2500
	if len(out.sent) != 1 || out.sent[0].Request != r {
		t.Fatalf("after the remote prefill drained, Tick dispatched %v, want the queued request", out.sent)
	}
	out.reset()
	if err := s.SetRemoteLoad(id, Load{PendingTokens: 3000, Running: 1}); err != nil {
		t.Fatal(err)
	}
	if st := state(s, id); st.PendingTokens != 2048 {
		t.Fatalf("own pending = %d, want 2048", st.PendingTokens)
	}
	s.FirstToken(r)
	small := req(prompt(2, 2, 0, 1)) // nothing pending here, but 3000 elsewhere: waits
	if d, _ := s.Submit(small, &out); !d.Queued {
		t.Errorf("request dispatched over the budget other replicas filled, want queued")
	}
}

// An instance at the engines' concurrency limit (MaxRunning, all replicas)
// is sent nothing more until a request completes.
func TestQueueMaxRunning(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 1 << 20, MaxRunning: 3}}
	s, _ := mustNew(t, cfg, 1)
	id := pool(1)[0].ID
	var out outcome
	if err := s.SetRemoteLoad(id, Load{Running: 1}); err != nil {
		t.Fatal(err)
	}
	var reqs []*Request
	for i := 0; i < 3; i++ {
		r := req(prompt(uint64(10+i), uint64(i), 0, 1))
		reqs = append(reqs, r)
		d, _ := s.Submit(r, &out)
		if want := i >= 2; d.Queued != want { // 1 remote + 2 own = 3
			t.Fatalf("request %d queued = %v, want %v", i, d.Queued, want)
		}
	}
	out.reset()
	s.FirstToken(reqs[0]) // prefill done, still running: nothing frees
	if len(out.sent) != 0 {
		t.Fatalf("first token dispatched %d requests, want none (still 3 running)", len(out.sent))
	}
	s.Complete(reqs[0])
	if len(out.sent) != 1 || out.sent[0].Request != reqs[2] {
		t.Fatalf("after a completion dispatched %v, want the held request", out.sent)
	}
	if _, err := New(Config{Queue: QueueConfig{MaxRunning: -1}}, pool(1)); err == nil {
		t.Errorf("New accepted queue.max_running -1")
	}
}

func TestQueueBudgetAndOrder(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 2500}}
	s, clk := mustNew(t, cfg, 1)
	var out outcome
	first := req(prompt(1, 1, 3, 4)) // 2048 uncached: dispatched
	if d, _ := s.Submit(first, &out); d.Queued {
		t.Fatalf("first request queued, want dispatched (nothing pending)")
	}
	second := req(prompt(2, 2, 0, 4)) // 2048 + 2048 > 2500: waits
	if d, _ := s.Submit(second, &out); !d.Queued {
		t.Fatalf("second request dispatched, want queued (over budget)")
	}
	clk.Advance(time.Millisecond)
	third := req(prompt(1, 3, 3, 4)) // shares 3 blocks with first: 2048 + 512 > 2500 waits, cache-rich
	if d, _ := s.Submit(third, &out); !d.Queued {
		t.Fatalf("third request dispatched, want queued")
	}
	out.reset()
	s.FirstToken(first) // pending drops to 0: one request fits
	if len(out.sent) < 1 || out.sent[0].Request != third {
		t.Fatalf("after first token dispatched %v, want the cache-rich third request first", out.sent)
	}
	if st := state(s, pool(1)[0].ID); st.Queued != 1 || st.Running != 2 {
		t.Errorf("state = %+v, want 1 queued, 2 running", st)
	}
}

// A request that waited MaxWait exactly is still queued; a nanosecond more
// and Tick fails it with ErrQueueTimeout and counts it. The clock starts
// late, so the wait is measured from the enqueue time, not from zero.
func TestQueueMaxWaitExpires(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100, MaxWait: 2 * time.Second}}
	s, clk := mustNew(t, cfg, 1)
	out := recorder(s)
	clk.Advance(10 * time.Second)
	route(t, s, req(prompt(1, 1, 0, 4)))
	waiting := req(prompt(2, 2, 0, 4))
	route(t, s, waiting)
	clk.Advance(2 * time.Second)
	s.Tick()
	if len(out.failed) != 0 || s.QueueLen() != 1 {
		t.Fatalf("after waiting MaxWait exactly: failed %d, queued %d, want 0 and 1", len(out.failed), s.QueueLen())
	}
	clk.Advance(time.Nanosecond)
	s.Tick()
	if len(out.failed) != 1 || out.failed[0].Request != waiting || !errors.Is(out.failed[0].Err, ErrQueueTimeout) {
		t.Fatalf("failed = %+v, want the waiting request with ErrQueueTimeout", out.failed)
	}
	if s.QueueLen() != 0 {
		t.Errorf("QueueLen() = %d, want 0", s.QueueLen())
	}
	if st := s.Stats(); st.Expired != 1 {
		t.Errorf("Stats().Expired = %d, want 1", st.Expired)
	}
}

func TestCancelQueuedAndInflight(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}
	s, _ := mustNew(t, cfg, 1)
	a, b := req(prompt(1, 1, 0, 4)), req(prompt(2, 2, 0, 4))
	route(t, s, a)
	route(t, s, b)
	s.Cancel(b)
	if s.QueueLen() != 0 {
		t.Fatalf("QueueLen() after cancel = %d, want 0", s.QueueLen())
	}
	s.Cancel(a)
	st := state(s, pool(1)[0].ID)
	if st.Running != 0 || st.PendingTokens != 0 || st.QueuedTokens != 0 {
		t.Errorf("state after cancelling everything = %+v, want idle", st)
	}
	s.Complete(a) // a second finish is ignored
	if st := state(s, pool(1)[0].ID); st.Running != 0 {
		t.Errorf("Running = %d after double finish, want 0", st.Running)
	}
}

// TestQueueLateRequests queues A, which then misses its 1 s SLO while it
// waits, and B, which can still make its SLO, behind a large request X, and
// checks the order in which each queue discipline dispatches them.
func TestQueueLateRequests(t *testing.T) {
	tests := []struct {
		order, late string
		idleRunning int
		first       []string // dispatched when X's prefill ends
		second      []string // dispatched when B's prefill ends
		failed      []string // failed with ErrLate
	}{
		{OrderCache, LateIdle, 0, []string{"A", "B"}, nil, nil},
		{OrderDeadline, LateServe, 0, []string{"B", "A"}, nil, nil},
		{OrderDeadline, LateIdle, 0, []string{"B"}, []string{"A"}, nil},
		// X and B still decode: not idle with IdleRunning 2, A waits.
		{OrderDeadline, LateIdle, 2, []string{"B"}, nil, nil},
		{OrderDeadline, LateReject, 0, []string{"B"}, nil, []string{"A"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%d", tt.order, tt.late, tt.idleRunning), func(t *testing.T) {
			cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 5000, Order: tt.order, Late: tt.late, IdleRunning: tt.idleRunning}}
			s, clk := mustNew(t, cfg, 1)
			names := map[*Request]string{}
			x := req(prompt(1, 1, 0, 8)) // 4096 tokens: dispatched
			a := req(prompt(2, 2, 0, 4)) // 2048 tokens: 4096+2048 > budget, queued
			a.SLO = time.Second
			b := req(prompt(3, 3, 0, 4))
			names[x], names[a], names[b] = "X", "A", "B"
			if d := route(t, s, x); d.Queued {
				t.Fatal("X queued, want dispatched")
			}
			if d := route(t, s, a); !d.Queued {
				t.Fatal("A dispatched, want queued")
			}
			clk.Advance(2 * time.Second) // A is past its SLO
			if d := route(t, s, b); !d.Queued {
				t.Fatal("B dispatched, want queued")
			}
			out := recorder(s)
			s.FirstToken(x)
			got := func() []string {
				var n []string
				for _, d := range out.sent {
					n = append(n, names[d.Request])
				}
				return n
			}
			if g := got(); !slices.Equal(g, tt.first) {
				t.Errorf("after X's first token dispatched %v, want %v", g, tt.first)
			}
			if failed := lateFailures(t, out, names); !slices.Equal(failed, tt.failed) {
				t.Errorf("failed %v, want %v", failed, tt.failed)
			}
			out.reset()
			clk.Advance(time.Second)
			s.FirstToken(b)
			if g := got(); !slices.Equal(g, tt.second) {
				t.Errorf("after B's first token dispatched %v, want %v", g, tt.second)
			}
			want := 2 - len(tt.first) - len(tt.second) - len(tt.failed) // A and B were queued
			if n := s.QueueLen(); n != want {
				t.Errorf("%d requests still queued, want %d", n, want)
			}
			if st := s.Stats(); st.Late != uint64(len(tt.failed)) {
				t.Errorf("Stats().Late = %d, want %d", st.Late, len(tt.failed))
			}
		})
	}
}

func TestQueueConfigValidation(t *testing.T) {
	for _, q := range []QueueConfig{{Order: "fifo"}, {Late: "drop"}, {IdleRunning: -1}} {
		if _, err := New(Config{Queue: q}, pool(2)); err == nil {
			t.Errorf("New() with %+v succeeded, want an error", q)
		}
	}
}

// TestQueueRejectOnArrival: with LateReject, a request that cannot meet its
// SLO even when it arrives gets ErrLate from Route itself.
func TestQueueRejectOnArrival(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 5000, Late: LateReject}}
	s, _ := mustNew(t, cfg, 1)
	route(t, s, req(prompt(1, 1, 0, 8))) // 4096 tokens pending
	r := req(prompt(2, 2, 0, 8))
	r.SLO = time.Millisecond
	var out outcome
	if _, err := s.Submit(r, &out); !errors.Is(err, ErrLate) {
		t.Fatalf("Submit() error = %v, want ErrLate", err)
	}
	if len(out.failed) != 0 || s.QueueLen() != 0 {
		t.Errorf("out.failed = %d, queued = %d; want the rejection only in the error", len(out.failed), s.QueueLen())
	}
}

// TestQueueLateByEstimate: X (4,096 tokens) and Y (2,048) are dispatched,
// A and B (2,048 each) queue behind the budget, A with a 1 s SLO, and A
// has waited 0.5 s when X's prefill ends. A's own prefill (0.33 s at the
// prior cost) still fits what is left of its SLO, so A has not missed it;
// but behind Y's pending prefill the estimate for A dispatched now is
// about 0.7 s. Once the router has learned that the engine answers as the
// estimate prices it (a fitted cost of 1.6e-4 s per token, the prior's), A
// goes behind B (which can make its SLO) and waits for an idle instance,
// and LateReject fails it only once it has missed the SLO outright. With
// the prior alone, or a fit that measures a token at a tenth of the
// estimate's cost (the estimate scaled down to about 0.07 s), A keeps its
// place.
func TestQueueLateByEstimate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fitted float64 // the fit's cost of a token, ahead or own (0: no fit)
		late   string
		first  []string // dispatched at X's first token
		second []string // dispatched at Y's and B's first tokens, 2 s later
		failed []string // failed with ErrLate then
	}{
		{"prior only", 0, LateIdle, []string{"A", "B"}, nil, nil},
		{"learned", 1.6e-4, LateIdle, []string{"B"}, []string{"A"}, nil},
		{"learned, reject", 1.6e-4, LateReject, []string{"B"}, nil, []string{"A"}},
		{"learned, the estimate ten times high", 1.6e-5, LateIdle, []string{"A", "B"}, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 7000, Late: tt.late}}
			s, clk := mustNew(t, cfg, 1)
			if tt.fitted > 0 { // a step-bound engine: a token ahead costs what one's own does
				teach(&s.est.ahead, tt.fitted, tt.fitted)
			}
			names := map[*Request]string{}
			x, y := req(prompt(1, 1, 0, 8)), req(prompt(2, 2, 0, 4))
			a, b := req(prompt(3, 3, 0, 4)), req(prompt(4, 4, 0, 4))
			a.SLO = time.Second
			names[x], names[y], names[a], names[b] = "X", "Y", "A", "B"
			for _, r := range []*Request{x, y} {
				if d := route(t, s, r); d.Queued {
					t.Fatalf("%s queued, want dispatched", names[r])
				}
			}
			for _, r := range []*Request{a, b} {
				if d := route(t, s, r); !d.Queued {
					t.Fatalf("%s dispatched, want queued", names[r])
				}
			}
			out := recorder(s)
			sent := func() []string {
				var n []string
				for _, d := range out.take() {
					n = append(n, names[d.Request])
				}
				return n
			}
			clk.Advance(500 * time.Millisecond)
			s.FirstToken(x)
			if g := sent(); !slices.Equal(g, tt.first) {
				t.Errorf("after X's first token dispatched %v, want %v", g, tt.first)
			}
			if len(out.failed) != 0 {
				t.Errorf("failed %d before A missed its SLO, want none", len(out.failed))
			}
			clk.Advance(2 * time.Second) // A has missed its SLO now
			s.FirstToken(y)
			if len(tt.first) == 1 {
				s.FirstToken(b)
			}
			if g := sent(); !slices.Equal(g, tt.second) {
				t.Errorf("after the first tokens dispatched %v, want %v", g, tt.second)
			}
			if failed := lateFailures(t, out, names); !slices.Equal(failed, tt.failed) {
				t.Errorf("failed %v, want %v", failed, tt.failed)
			}
		})
	}
}

// What the other replicas report pending on an instance does not make a
// request late there (their figures are up to a heartbeat old, and a
// replica may claim anything within RemoteBounds); this replica's own
// pending prefill does.
func TestLateIgnoresTheOthersPending(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "least-loaded", Queue: QueueConfig{Adaptive: true}}, 1)
	teach(&s.est.ahead, 1.6e-4, 1.6e-4)
	in, id := s.members[0], pool(1)[0].ID
	now := s.now()
	r := &Request{SLO: time.Second, uncached: 2048, arrived: now - 500*time.Millisecond} // 0.33 s of its own
	if s.late(in, r, now) {
		t.Fatal("late with nothing pending")
	}
	if err := s.SetRemoteLoad(id, Load{PendingTokens: 1 << 20, Running: 4}); err != nil {
		t.Fatal(err)
	}
	if s.late(in, r, now) {
		t.Error("late for the others' claim of 1M pending tokens")
	}
	if err := s.SetRemoteLoad(id, Load{}); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(prompt(1, 1, 0, 8))); d.Queued { // 4,096 tokens of this replica's pending
		t.Fatal("X queued, want dispatched")
	}
	if !s.late(in, r, now) {
		t.Errorf("on time behind 4,096 tokens of this replica's pending (pending %d, flight %d, estimate %.2f s, 0.5 s left)", in.pendingTokens.get(), in.inFlight(), in.ttftAt(in.pendingTokens.get(), r.uncached))
	}
}

// This replica's pending prefill counts at what the fit measured a token
// of work ahead to cost, relative to one of the request's own: behind
// 4,096 pending tokens a request with 0.5 s left is late on a step-bound
// engine (a token ahead costs what one's own does) and on time on one
// that prefills side by side (a tenth).
func TestLateCountsPendingAtTheFittedCost(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ahead float64 // the fit's cost of a token ahead; a token of its own costs 1.6e-4 s
		late  bool
	}{
		{"step-bound", 1.6e-4, true},
		{"side by side", 1.6e-5, false},
		{"a slope that is not a number", math.NaN(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: "least-loaded", Queue: QueueConfig{Adaptive: true}}, 1)
			if math.IsNaN(tt.ahead) {
				teach(&s.est.ahead, 1.6e-4, 1.6e-4)
				s.est.ahead.slopev.set(tt.ahead)
			} else {
				teach(&s.est.ahead, tt.ahead, 1.6e-4)
			}
			in := s.members[0]
			now := s.now()
			r := &Request{SLO: time.Second, uncached: 2048, arrived: now - 500*time.Millisecond} // 0.33 s of its own
			if d := route(t, s, req(prompt(1, 1, 0, 8))); d.Queued {
				t.Fatal("X queued, want dispatched")
			}
			if got := s.late(in, r, now); got != tt.late {
				t.Errorf("late = %v behind %d pending tokens (fit: %.1e s a token ahead, %.1e of its own), want %v",
					got, in.pendingTokens.get(), s.est.ahead.slope(), s.est.ahead.own(), tt.late)
			}
		})
	}
}

// lateFailures returns the names of the requests out saw fail, each of
// which must have failed with ErrLate.
func lateFailures(t *testing.T, out *outcome, names map[*Request]string) []string {
	t.Helper()
	var failed []string
	for _, f := range out.failed {
		if !errors.Is(f.Err, ErrLate) {
			t.Errorf("failure %v, want ErrLate", f.Err)
		}
		failed = append(failed, names[f.Request])
	}
	return failed
}
