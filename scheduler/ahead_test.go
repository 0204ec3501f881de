package scheduler

import (
	"testing"
	"time"
)

// The work ahead of a new request, which every estimate starts from, is
// this replica's queued (less late) and pending tokens plus the other
// replicas' queued and pending tokens, or the engine's own queue at the
// average request size when that is longer. Pick's EstimatedTTFT shows it:
// per-token cost x (ahead + the request's own uncached tokens), with the
// estimate's other terms off (see estimator_test.go for those).
func TestAheadCountsEveryLoad(t *testing.T) {
	const own = 512 // the probe's one uncached block
	tests := []struct {
		name  string
		setup func(t *testing.T, s *Scheduler, clk *fakeClock, id string)
		ahead int
	}{
		{"idle", func(*testing.T, *Scheduler, *fakeClock, string) {}, 0},
		{"remote queued", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			mustLoad(t, s, id, Load{QueuedTokens: 1000})
		}, 1000},
		{"remote pending", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			mustLoad(t, s, id, Load{PendingTokens: 2000})
		}, 2000},
		{"remote queued and pending", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			mustLoad(t, s, id, Load{QueuedTokens: 1000, PendingTokens: 2000, Queued: 3, Running: 4})
		}, 3000},
		{"own pending", func(t *testing.T, s *Scheduler, _ *fakeClock, _ string) {
			route(t, s, req(prompt(1, 1, 0, 4)))
		}, 2048},
		{"own pending and queued", func(t *testing.T, s *Scheduler, _ *fakeClock, _ string) {
			route(t, s, req(prompt(1, 1, 0, 4)))
			if d := route(t, s, req(prompt(2, 2, 0, 3))); !d.Queued {
				t.Fatal("second request dispatched, want queued (over budget)")
			}
		}, 2048 + 1536},
		{"own queued request gone late", func(t *testing.T, s *Scheduler, clk *fakeClock, _ string) {
			route(t, s, req(prompt(1, 1, 0, 4)))
			route(t, s, req(prompt(2, 2, 0, 3)))
			clk.Advance(6 * time.Second) // past the 5 s SLO: it waits behind every other
			s.Tick()
		}, 2048},
		{"own and remote", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			route(t, s, req(prompt(1, 1, 0, 4)))
			mustLoad(t, s, id, Load{QueuedTokens: 100, PendingTokens: 10})
		}, 2158},
		{"engine queue longer", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			route(t, s, req(prompt(1, 1, 0, 4))) // average uncached: 2048
			// A limit of 16 seen once, then a queue below it (waiting
			// for memory, not a slot: no slot wait in the estimate).
			for _, l := range []EngineLoad{{Waiting: 1, Running: 16}, {Waiting: 3, Running: 1}} {
				if err := s.SetEngineLoad(id, l); err != nil {
					t.Fatal(err)
				}
			}
		}, 3 * 2048},
		{"engine queue shorter", func(t *testing.T, s *Scheduler, _ *fakeClock, id string) {
			route(t, s, req(prompt(1, 1, 0, 4)))
			mustLoad(t, s, id, Load{PendingTokens: 5000})
			if err := s.SetEngineLoad(id, EngineLoad{Waiting: 2}); err != nil {
				t.Fatal(err)
			}
		}, 2048 + 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Policy: "least-loaded", Queue: QueueConfig{Budget: 1000}, Cost: bare(CostConfig{PerToken: 1e-4, LearnRate: -1})}
			s, clk := mustNew(t, cfg, 1)
			id := pool(1)[0].ID
			tt.setup(t, s, clk, id)
			d, err := s.Pick(req(prompt(9, 9, 0, 1)))
			if err != nil {
				t.Fatal(err)
			}
			want := seconds(1e-4 * float64(tt.ahead+own))
			if diff := d.EstimatedTTFT - want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Errorf("Pick().EstimatedTTFT = %v, want %v (%d tokens ahead + %d own)", d.EstimatedTTFT, want, tt.ahead, own)
			}
		})
	}
}

func mustLoad(t *testing.T, s *Scheduler, id string, l Load) {
	t.Helper()
	if err := s.SetRemoteLoad(id, l); err != nil {
		t.Fatal(err)
	}
}
