package scheduler

import (
	"testing"
	"time"
)

// identical routes n copies of one 10-block prompt at rate per second,
// each through prefill at once and finished service later, and returns
// how many each instance got.
func identical(t *testing.T, cfg Config, n int, rate float64, service time.Duration) map[string]int {
	t.Helper()
	s, clk := mustNew(t, cfg, 8)
	blocks := prompt(1, 1, 10, 10)
	type done struct {
		r  *Request
		at time.Duration
	}
	var running []done
	got := map[string]int{}
	var now time.Duration
	step := time.Duration(float64(time.Second) / rate)
	for i := 0; i < n; i++ {
		clk.Advance(step)
		now += step
		for len(running) > 0 && running[0].at <= now {
			s.Complete(running[0].r)
			running = running[1:]
		}
		r := req(blocks)
		d := route(t, s, r)
		if d.Queued {
			t.Fatalf("request %d queued, want dispatched (no router queue)", i)
		}
		s.FirstToken(r)
		running = append(running, done{r, now + service})
		got[d.Instance]++
	}
	return got
}

// 200 identical prompts (a load test, a popular fixed prompt) spread over
// the pool: a fully cached request is not free (per-request cost, its
// decode, its sequence slot), and a key that cannot be split deeper is
// replicated over more candidate sets. Without replication they stay on
// one candidate set (Candidates instances).
func TestIdenticalPromptsSpread(t *testing.T) {
	base := Config{KeyDepth: KeyDepthConfig{Window: 100}}
	got := identical(t, base, 200, 20, 30*time.Second)
	most := 0
	for _, c := range got {
		most = max(most, c)
	}
	t.Logf("replicated: %v", got)
	if len(got) < 8 || most > 200/8*3 {
		t.Errorf("200 identical requests over %d instances, the busiest with %d: want all 8, none above %d", len(got), most, 200/8*3)
	}
	off := base
	off.KeyDepth.MaxReplicas = -1
	pinned := identical(t, off, 200, 20, 30*time.Second)
	t.Logf("not replicated: %v", pinned)
	if len(pinned) > base.withDefaults().Candidates {
		t.Errorf("without replication the prompt reached %d instances, want at most its %d candidates (the test cannot tell replication apart)",
			len(pinned), base.withDefaults().Candidates)
	}
}

// A decode-heavy instance loses ties: of two candidates that hold nothing
// of a prompt and have no prefill queued, the one with the smaller decode
// batch wins, whichever is first on the rings, and whichever way the batch
// is known (the engine's metrics, the other routers' reports).
func TestDecodeHeavyInstanceLosesTies(t *testing.T) {
	for _, how := range []string{"engine", "remote"} {
		for heavy := 0; heavy < 2; heavy++ {
			s, _ := mustNew(t, Config{Candidates: 2}, 2)
			ids := pool(2)
			switch how {
			case "engine":
				if err := s.SetEngineLoad(ids[heavy].ID, EngineLoad{Running: 150}); err != nil {
					t.Fatal(err)
				}
			case "remote":
				mustLoad(t, s, ids[heavy].ID, Load{Running: 150})
			}
			d, err := s.Pick(req(prompt(7, 7, 0, 4)))
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance == ids[heavy].ID {
				t.Errorf("%s: a cold request went to %s, which runs 150 sequences, want %s (idle)", how, d.Instance, ids[1-heavy].ID)
			}
		}
	}
}

// A nearly full KV memory, as the engine reports it, raises the estimate;
// and the terms /debug/instances shows add up.
func TestMemoryPressureRaisesEstimate(t *testing.T) {
	s, _ := mustNew(t, Config{}, 1)
	id := pool(1)[0].ID
	before := state(s, id).Estimate
	if err := s.SetEngineLoad(id, EngineLoad{KVUsage: 0.97}); err != nil {
		t.Fatal(err)
	}
	after := state(s, id).Estimate
	if !(after.Memory > 0) || !(after.Total > before.Total) {
		t.Errorf("estimate at 97%% KV use = %+v, want a memory term above the idle %+v", after, before)
	}
	if d := after.Total - (after.Prefill + after.Decode + after.Memory); d > 1e-12 || d < -1e-12 {
		t.Errorf("terms %+v do not add up to their total", after)
	}
	if err := s.SetEngineLoad(id, EngineLoad{KVUsage: 1.5}); err == nil {
		t.Error("SetEngineLoad accepted a KV usage of 1.5")
	}
}
