package scheduler

import (
	"testing"
	"time"
)

// hotspot routes count requests sharing a 2-block key so that they all pile
// up on one candidate (high headroom keeps the cache choice) and returns the
// scheduler, the hot instance and the requests.
func hotspot(t *testing.T, rb RebalanceConfig, count int) (*Scheduler, string, []*Request) {
	t.Helper()
	cfg := Config{
		Cost:      CostConfig{PerToken: 1e-4, LearnRate: -1},
		Params:    Params{"headroom": 4.0},
		Queue:     QueueConfig{Budget: 4096},
		Rebalance: rb,
	}
	s, _ := mustNew(t, cfg, 8)
	var reqs []*Request
	for i := 0; i < count; i++ {
		r := req(prompt(42, uint64(i), 2, 8))
		route(t, s, r)
		reqs = append(reqs, r)
	}
	s.mu.Lock()
	hot := reqs[len(reqs)-1].inst.ID
	s.mu.Unlock()
	return s, hot, reqs
}

func TestRebalancerStaysInPairAndGains(t *testing.T) {
	s, hot, reqs := hotspot(t, RebalanceConfig{OldestWait: -1}, 40)
	before := state(s, hot)
	if before.Queued < 30 {
		t.Fatalf("hot instance has %d queued, want a hotspot", before.Queued)
	}
	moves := s.Plan()
	if len(moves) == 0 {
		t.Fatal("Plan() = no moves for a hotspot")
	}
	s.mu.Lock()
	for _, m := range moves {
		if m.Benefit <= 0 {
			t.Errorf("move %s->%s benefit %v, want > 0", m.From, m.To, m.Benefit)
		}
		inPair := false
		for k := 0; k < m.Request.ncand; k++ {
			inPair = inPair || m.Request.cand[k].ID == m.To
		}
		if !inPair || m.From != hot {
			t.Errorf("move %s->%s leaves the request's candidate set", m.From, m.To)
		}
	}
	s.mu.Unlock()
	if n := s.Apply(moves); n != len(moves) {
		t.Errorf("Apply() = %d, want %d", n, len(moves))
	}
	// Every target still meets the SLO with what it received.
	for _, st := range s.Instances() {
		if st.ID != hot && float64(st.QueuedTokens+st.PendingTokens)*1e-4 > 5.0+0.5 {
			t.Errorf("target %s holds %d tokens: over the SLO after migration", st.ID, st.QueuedTokens+st.PendingTokens)
		}
	}
	after := state(s, hot)
	t.Logf("hotspot %s: %d tokens queued+pending before, %d after %d moves", hot, before.QueuedTokens+before.PendingTokens, after.QueuedTokens+after.PendingTokens, len(moves))
	if st := s.Stats(); st.Migrations != uint64(len(moves)) {
		t.Errorf("Stats().Migrations = %d, want %d", st.Migrations, len(moves))
	}
	// Re-applying the same plan does nothing: moves are validated.
	if n := s.Apply(moves); n != 0 {
		t.Errorf("second Apply() = %d, want 0", n)
	}
	for _, r := range reqs {
		s.Complete(r)
	}
	if st := state(s, hot); st.Queued != 0 || st.Running != 0 || st.PendingTokens != 0 {
		t.Errorf("after completing everything: %+v, want idle", st)
	}
}

// With a threshold the other candidate can absorb, the round stops as soon
// as the source meets it: no extra moves.
func TestRebalancerStopsWhenSourceMeetsThreshold(t *testing.T) {
	const thr = 100000
	s, hot, _ := hotspot(t, RebalanceConfig{OldestWait: -1, PendingTokens: thr}, 40)
	load := func() int { st := state(s, hot); return st.QueuedTokens + st.PendingTokens }
	before := load()
	moves := s.Plan()
	s.Apply(moves)
	after := load()
	t.Logf("threshold %d: %d -> %d tokens with %d moves", thr, before, after, len(moves))
	if after > thr {
		t.Errorf("source holds %d tokens after the round, want <= %d", after, thr)
	}
	if per := 3072; after+per <= thr {
		t.Errorf("source holds %d tokens: one move fewer (+%d) would also meet %d, so the round over-migrated", after, per, thr)
	}
	if again := s.Plan(); len(again) != 0 {
		t.Errorf("Plan() after the round = %d moves, want 0 (source meets the threshold)", len(again))
	}
}

func TestRebalancerOffAndOldestWaitTrigger(t *testing.T) {
	// Rebalance disabled by the policy parameter: Tick moves nothing.
	cfg := Config{
		Cost:   CostConfig{PerToken: 1e-4, LearnRate: -1},
		Params: Params{"headroom": 4.0, "rebalance": false},
		Queue:  QueueConfig{Budget: 4096},
	}
	s, _ := mustNew(t, cfg, 8)
	for i := 0; i < 40; i++ {
		route(t, s, req(prompt(42, uint64(i), 2, 8)))
	}
	s.Tick()
	if m := s.Stats().Migrations; m != 0 {
		t.Errorf("migrations with rebalance=false = %d, want 0", m)
	}

	// A small queue that is stuck (oldest wait over 3 s) is rebalanced even
	// under the load threshold.
	s2, hot, _ := hotspot(t, RebalanceConfig{PendingTokens: 1 << 30}, 4)
	if len(s2.Plan()) != 0 {
		t.Fatal("Plan() moved requests of a young queue under the threshold")
	}
	s2.mu.Lock()
	for _, r := range s2.byID[hot].queue {
		r.enqueued -= 4 * time.Second
	}
	s2.mu.Unlock()
	if len(s2.Plan()) == 0 {
		t.Error("Plan() = no moves for a queue stuck for 4 s")
	}
}

func TestRebalancerNeighborOption(t *testing.T) {
	// One-candidate keys (d=1) can only move with the neighbour option.
	for _, neighbor := range []bool{false, true} {
		cfg := Config{
			Candidates: 1,
			Cost:       CostConfig{PerToken: 1e-4, LearnRate: -1},
			Params:     Params{"headroom": 4.0},
			Queue:      QueueConfig{Budget: 4096},
			Rebalance:  RebalanceConfig{OldestWait: -1, Neighbor: neighbor},
		}
		s, _ := mustNew(t, cfg, 8)
		for i := 0; i < 40; i++ {
			route(t, s, req(prompt(42, uint64(i), 2, 8)))
		}
		got := len(s.Plan())
		if neighbor && got == 0 {
			t.Error("Neighbor: Plan() = no moves, want some to the next member")
		}
		if !neighbor && got != 0 {
			t.Errorf("no Neighbor, one candidate: Plan() = %d moves, want 0", got)
		}
	}
}

// A move must meet what is left of the request's SLO after its wait: a
// request that can no longer make it on any candidate stays where it is.
func TestRebalancerCountsTheWait(t *testing.T) {
	cfg := Config{
		Cost:      CostConfig{PerToken: 1e-4, LearnRate: -1},
		Params:    Params{"headroom": 4.0},
		Queue:     QueueConfig{Budget: 4096},
		Rebalance: RebalanceConfig{OldestWait: -1},
	}
	s, clk := mustNew(t, cfg, 8)
	for i := 0; i < 40; i++ {
		route(t, s, req(prompt(42, uint64(i), 2, 8)))
	}
	if len(s.Plan()) == 0 {
		t.Fatal("Plan() = no moves for a fresh hotspot")
	}
	// 4.9 s into a 5 s SLO, every target's estimate (>= 6 uncached blocks
	// at 0.1 ms per token, about 0.3 s) exceeds the 0.1 s left.
	clk.Advance(4900 * time.Millisecond)
	if moves := s.Plan(); len(moves) != 0 {
		t.Errorf("Plan() = %d moves for requests with 0.1 s of SLO left, want none", len(moves))
	}
}

// The rebalancer prices the prefill a move adds at the admission fit's
// measured cost of a token of a request's own, as the reach does, where
// that runs above the estimate's per-token cost: on llm-d's simulator the
// estimate's cost learned 4e-5 s a token where a prompt's own tokens cost
// 2e-4 to 4e-4, and moves off a hotspot re-prefilled their group's prompt
// elsewhere for a gain they did not get. 40 requests share a 1,024-token
// prefix on one hot instance, 4,096 tokens each.
func TestRebalancerPricesTheMovedPrefillAtTheFittedCost(t *testing.T) {
	for _, tt := range []struct {
		own   float64 // the fit's cost of a token of the request's own (0: no fit)
		moves bool
	}{
		{0, true},     // the estimate alone
		{1e-4, true},  // the fit agrees with the estimate's 1e-4
		{1e-2, false}, // the 1,024 tokens moved cost 10 s
	} {
		s, _, _ := hotspot(t, RebalanceConfig{OldestWait: -1}, 40)
		if tt.own > 0 {
			teach(&s.est.ahead, tt.own, tt.own)
		}
		if n := len(s.Plan()); (n > 0) != tt.moves {
			t.Errorf("own cost %g: Plan() = %d moves, want moves %v", tt.own, n, tt.moves)
		}
	}
}
