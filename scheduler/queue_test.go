package scheduler

import (
	"errors"
	"testing"
	"time"
)

// victimWait saturates one instance with cache-rich requests and returns
// how long a zero-hit request that arrives in the middle waits before it is
// dispatched (or the give-up time if it never is).
func victimWait(t *testing.T, aging float64) time.Duration {
	cfg := Config{
		Policy: "cache-affinity",
		Queue:  QueueConfig{Budget: 1000, AgingRate: aging},
	}
	s, clk := mustNew(t, cfg, 1)
	var out Outcome
	var inflight []*Request
	shared := prompt(1, 0, 3, 4)
	warmReq := req(shared) // warms the shared prefix
	route(t, s, warmReq)
	inflight = append(inflight, warmReq)
	var victim *Request
	var victimAt time.Duration
	const step = 100 * time.Millisecond
	for tick := 0; tick < 400; tick++ {
		now := time.Duration(tick) * step
		// Two arrivals per step, one service per step: saturated.
		for k := 0; k < 2; k++ {
			if _, err := s.Route(req(prompt(1, uint64(tick*2+k+1), 3, 4)), &out); err != nil {
				t.Fatal(err)
			}
		}
		if tick == 20 {
			victim = req(prompt(999, 999, 0, 4))
			victimAt = now
			if _, err := s.Route(victim, &out); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range out.Dispatched {
			if d.Request == victim {
				return now - victimAt
			}
			inflight = append(inflight, d.Request)
		}
		out.Reset()
		clk.Advance(step)
		if len(inflight) > 0 {
			r := inflight[0]
			inflight = inflight[1:]
			s.FirstToken(r, &out)
			s.Complete(r, &out)
		}
	}
	return 400 * step
}

func TestQueueAgingBoundsWait(t *testing.T) {
	withAging := victimWait(t, 4096)
	without := victimWait(t, 1e-9)
	t.Logf("zero-hit request under saturation waited %v with aging, %v without", withAging, without)
	// 20 requests were queued ahead of it at 100 ms each, plus the
	// 1536/4096 s it takes to outrank newcomers: a few seconds at most.
	if withAging > 4*time.Second {
		t.Errorf("wait with aging = %v, want <= 4s", withAging)
	}
	if without < 30*time.Second {
		t.Errorf("wait without aging = %v; the test no longer shows starvation", without)
	}
}

func TestQueueBudgetAndOrder(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 2500}}
	s, clk := mustNew(t, cfg, 1)
	var out Outcome
	first := req(prompt(1, 1, 3, 4)) // 2048 uncached: dispatched
	if d, _ := s.Route(first, &out); d.Queued {
		t.Fatalf("first request queued, want dispatched (nothing pending)")
	}
	second := req(prompt(2, 2, 0, 4)) // 2048 + 2048 > 2500: waits
	if d, _ := s.Route(second, &out); !d.Queued {
		t.Fatalf("second request dispatched, want queued (over budget)")
	}
	clk.Advance(time.Millisecond)
	third := req(prompt(1, 3, 3, 4)) // shares 3 blocks with first: 2048 + 512 > 2500 waits, cache-rich
	if d, _ := s.Route(third, &out); !d.Queued {
		t.Fatalf("third request dispatched, want queued")
	}
	out.Reset()
	s.FirstToken(first, &out) // pending drops to 0: one request fits
	if len(out.Dispatched) < 1 || out.Dispatched[0].Request != third {
		t.Fatalf("after first token dispatched %v, want the cache-rich third request first", out.Dispatched)
	}
	if st := state(s, pool(1)[0].ID); st.Queued != 1 || st.Running != 2 {
		t.Errorf("state = %+v, want 1 queued, 2 running", st)
	}
}

func TestQueueMaxWaitExpires(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100, MaxWait: 2 * time.Second}}
	s, clk := mustNew(t, cfg, 1)
	var out Outcome
	route(t, s, req(prompt(1, 1, 0, 4)))
	waiting := req(prompt(2, 2, 0, 4))
	route(t, s, waiting)
	clk.Advance(time.Second)
	s.Tick(&out)
	if len(out.Failed) != 0 {
		t.Fatalf("failed after 1s = %d, want 0", len(out.Failed))
	}
	clk.Advance(1500 * time.Millisecond)
	s.Tick(&out)
	if len(out.Failed) != 1 || out.Failed[0].Request != waiting || !errors.Is(out.Failed[0].Err, ErrQueueTimeout) {
		t.Fatalf("failed = %+v, want the waiting request with ErrQueueTimeout", out.Failed)
	}
	if s.QueueLen() != 0 {
		t.Errorf("QueueLen() = %d, want 0", s.QueueLen())
	}
}

func TestCancelQueuedAndInflight(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}
	s, _ := mustNew(t, cfg, 1)
	var out Outcome
	a, b := req(prompt(1, 1, 0, 4)), req(prompt(2, 2, 0, 4))
	route(t, s, a)
	route(t, s, b)
	s.Cancel(b, &out)
	if s.QueueLen() != 0 {
		t.Fatalf("QueueLen() after cancel = %d, want 0", s.QueueLen())
	}
	s.Cancel(a, &out)
	st := state(s, pool(1)[0].ID)
	if st.Running != 0 || st.PendingTokens != 0 || st.QueuedTokens != 0 {
		t.Errorf("state after cancelling everything = %+v, want idle", st)
	}
	s.Complete(a, &out) // a second finish is ignored
	if st := state(s, pool(1)[0].ID); st.Running != 0 {
		t.Errorf("Running = %d after double finish, want 0", st.Running)
	}
}
