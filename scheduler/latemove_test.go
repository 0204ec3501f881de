package scheduler

import (
	"testing"
	"time"
)

// lateAtHotspot piles requests of one key up on one candidate, as hotspot
// does, with the threshold out of reach and OldestWait off, so that only a
// late request's move can be planned; it returns one queued request and its
// instance. Each prompt has nblocks blocks of 512 tokens, the first 2
// shared.
func lateAtHotspot(t *testing.T, order string, nblocks int) (*Scheduler, *fakeClock, *Request, *instance) {
	t.Helper()
	cfg := Config{
		Cost:      CostConfig{PerToken: 1e-4, LearnRate: -1},
		Params:    Params{"headroom": 4.0},
		Queue:     QueueConfig{Budget: 4096, Order: order},
		Rebalance: RebalanceConfig{OldestWait: -1, PendingTokens: 1 << 30},
	}
	s, clk := mustNew(t, cfg, 8)
	var last *Request
	for i := 0; i < 40; i++ {
		last = req(prompt(42, uint64(i), 2, nblocks))
		route(t, s, last)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last.state != stateQueued {
		t.Fatalf("the last request is not held (state %v)", last.state)
	}
	return s, clk, last, last.inst
}

// otherCandidate returns a candidate of r other than in.
func otherCandidate(t *testing.T, s *Scheduler, r *Request, in *instance) *instance {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := 0; k < r.ncand; k++ {
		if r.cand[k] != in {
			return r.cand[k]
		}
	}
	t.Fatal("the request has no other candidate")
	return nil
}

// A late request moves to the candidate that holds its prompt, below every
// threshold; on time it stays.
func TestLateRequestFollowsItsPrefix(t *testing.T) {
	// 40 blocks: 20,480 tokens, a 3.9 s prefill at 0.1 ms a token beyond
	// the 2 shared blocks.
	s, clk, r, src := lateAtHotspot(t, OrderDeadline, 40)
	to := otherCandidate(t, s, r, src)

	// On time, with its whole prompt cached on another candidate: the
	// rebalancer's thresholds are out of reach, so nothing moves.
	if err := s.RecordCached(to.ID, r.Blocks, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if moves := s.Plan(); len(moves) != 0 {
		t.Fatalf("Plan() = %d moves before any request is late, want 0", len(moves))
	}

	// 4.9 s into its 5 s SLO every held request is late. Only r's prompt
	// is cached elsewhere.
	clk.Advance(4900 * time.Millisecond)
	moves := s.Plan()
	if len(moves) != 1 {
		t.Fatalf("Plan() = %d moves for late requests, want 1 (the one whose prompt %s holds)", len(moves), to.ID)
	}
	if m := moves[0]; m.Request != r || m.To != to.ID || m.From != src.ID || m.Benefit <= 0 {
		t.Fatalf("move = %s->%s (benefit %v, request %p), want the late request %p %s->%s with a positive benefit", m.From, m.To, m.Benefit, m.Request, r, src.ID, to.ID)
	}
	if n := s.Apply(moves); n != 1 {
		t.Fatalf("Apply() = %d, want 1", n)
	}
	s.mu.Lock()
	inst, cached, reason := r.inst, r.cached, r.dec.Reason
	s.mu.Unlock()
	if inst != to || cached != r.Tokens || reason != ReasonMigrated {
		t.Errorf("after the move: at %s with %d of %d tokens cached (%v), want at %s fully cached (migrated)", inst.ID, cached, r.Tokens, reason, to.ID)
	}
	// Where it is now it holds the longest prefix: it stays.
	if moves := s.Plan(); len(moves) != 0 {
		t.Errorf("Plan() after the move = %d moves, want 0", len(moves))
	}
}

// A late request does not move for a prefix that saves less than half of
// its prefill left, or less than lateMinSaving of its SLO, nor under the
// cache order, which has no late requests.
func TestLateRequestStaysWithoutALongerPrefix(t *testing.T) {
	tests := []struct {
		name    string
		order   string
		nblocks int // blocks of each prompt, 2 shared (cached at its own instance)
		held    int // blocks of r's prompt cached on another candidate
	}{
		{name: "the same 2 blocks", order: OrderDeadline, nblocks: 40, held: 2},
		{name: "2 of 38 uncached blocks more: under half", order: OrderDeadline, nblocks: 40, held: 4},
		{name: "30 of 78 uncached blocks more: 1.5 s saved, under half", order: OrderDeadline, nblocks: 80, held: 32},
		{name: "the whole 8-block prompt: 0.3 s saved, under a fifth of the SLO", order: OrderDeadline, nblocks: 8, held: 8},
		{name: "cache order: no late requests", order: OrderCache, nblocks: 40, held: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, r, src := lateAtHotspot(t, tt.order, tt.nblocks)
			to := otherCandidate(t, s, r, src)
			if err := s.RecordCached(to.ID, r.Blocks[:tt.held], time.Time{}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(4900 * time.Millisecond)
			if moves := s.Plan(); len(moves) != 0 {
				t.Errorf("Plan() = %d moves, want 0", len(moves))
			}
		})
	}
}

// A hostile cache claim (a replica or Redis writer that records every
// late request's whole prompt on every other candidate) moves each late
// request once, and no further: among equal holders it stays where it went.
func TestLateRequestMovesOnceForFalseClaims(t *testing.T) {
	s, clk, _, src := lateAtHotspot(t, OrderDeadline, 40)
	s.mu.Lock()
	queued := append([]*Request(nil), src.queue...)
	s.mu.Unlock()
	for _, r := range queued {
		for k := 0; k < r.ncand; k++ {
			if c := r.cand[k]; c != src {
				if err := s.RecordCached(c.ID, r.Blocks, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	clk.Advance(4900 * time.Millisecond)
	moves := s.Plan()
	if len(moves) == 0 || len(moves) > len(queued) {
		t.Fatalf("Plan() = %d moves for %d late requests, want one each at most and some", len(moves), len(queued))
	}
	if n := s.Apply(moves); n != len(moves) {
		t.Fatalf("Apply() = %d, want %d", n, len(moves))
	}
	for round := 0; round < 3; round++ {
		if again := s.Plan(); len(again) != 0 {
			for _, m := range again {
				if m.late && m.From != src.ID {
					t.Fatalf("round %d: a moved late request moves again %s->%s", round, m.From, m.To)
				}
			}
			s.Apply(again)
		}
	}
	if st := s.Stats(); st.Migrations > uint64(len(queued)) {
		t.Errorf("migrations = %d for %d late requests, want at most one each", st.Migrations, len(queued))
	}
}
