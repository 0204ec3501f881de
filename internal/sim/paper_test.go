package sim

import (
	"reflect"
	"testing"

	"github.com/dualmap/dualmap/scheduler"
)

// TestPaperPreset checks that dualmap-paper configures the scheduler with
// exactly the paper's settings, in every queue mode, and that the dualmap
// policy keeps its own defaults.
func TestPaperPreset(t *testing.T) {
	sp, err := ParseSpec(PaperPreset)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{QueueRouter, QueueEngine, QueuePaper} {
		o := sp.apply(base)
		o.Queue = q
		c := &cluster{opt: o, index: map[string]int{}}
		if err := c.build(); err != nil {
			t.Fatal(err)
		}
		cfg := c.reps[0].Config()
		wantParams := scheduler.Params{"headroom": "0.5", "hopeless": "load", "tie": "0", "overflow": "none", "home": "0", "reach": "0"}
		switch {
		case cfg.Policy != "dualmap" || !reflect.DeepEqual(cfg.Params, wantParams):
			t.Errorf("%s: policy %s %v, want dualmap %v", q, cfg.Policy, cfg.Params, wantParams)
		case cfg.Candidates != 2:
			t.Errorf("%s: %d rings, want 2", q, cfg.Candidates)
		case cfg.KeyDepth.SplitFactor != 2 || cfg.KeyDepth.MergeFactor != 1 || cfg.KeyDepth.Window != 200 ||
			cfg.KeyDepth.WindowDuration != 0 || cfg.KeyDepth.Fixed != 0:
			t.Errorf("%s: key depth %+v, want split 2/n, merge 1/n over the last 200 requests", q, cfg.KeyDepth)
		case cfg.Cost.LearnRate >= 0 || cfg.Cost.PerToken != base.Profile.PrefillPerToken:
			t.Errorf("%s: cost %+v, want the profile's %g, never learned", q, cfg.Cost, base.Profile.PrefillPerToken)
		case cfg.Cost.RequestTokens >= 0 || cfg.Cost.StepBase >= 0 || cfg.Cost.DecodePerSeq >= 0 || cfg.Cost.MemoryWeight >= 0 || cfg.Cost.MaxSeqs < 1<<30:
			t.Errorf("%s: cost %+v, want pending prefill only (no request, step, memory or slot terms)", q, cfg.Cost)
		case cfg.KeyDepth.MaxReplicas >= 0:
			t.Errorf("%s: hot keys replicated up to %d, want never", q, cfg.KeyDepth.MaxReplicas)
		case cfg.Queue.Budget != 0 || cfg.Queue.Adaptive:
			t.Errorf("%s: router-queue budget %d (adaptive %v), want none", q, cfg.Queue.Budget, cfg.Queue.Adaptive)
		case cfg.Rebalance.PendingTokens != int(2.5/base.Profile.PrefillPerToken):
			t.Errorf("%s: rebalance threshold %d tokens, want SLO/2 worth: %d", q, cfg.Rebalance.PendingTokens, int(2.5/base.Profile.PrefillPerToken))
		}
	}
	// The tuned defaults are untouched.
	dm, _ := ParseSpec("dualmap")
	o := dm.apply(base)
	c := &cluster{opt: o, index: map[string]int{}}
	if err := c.build(); err != nil {
		t.Fatal(err)
	}
	cfg, def := c.reps[0].Config(), scheduler.DefaultConfig()
	if cfg.Candidates != def.Candidates || cfg.KeyDepth != def.KeyDepth || cfg.Cost.LearnRate != def.Cost.LearnRate ||
		cfg.Queue.Budget != 0 || !cfg.Queue.Adaptive || cfg.Rebalance.PendingTokens != 0 || len(cfg.Params) != 0 {
		t.Errorf("dualmap: %+v, want the scheduler's defaults and the router queue", cfg)
	}
	// A run of the preset goes straight to the engine: nothing is queued in
	// the router, so nothing migrates.
	res, err := Simulate(smallTrace(t, 1500), 6, sp.apply(Options{Instances: 4, Warmup: 100, Queue: QueueRouter}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Migrations != 0 || res.Completed == 0 {
		t.Errorf("preset run: %d migrations, %d completed; want 0 and > 0", res.Migrations, res.Completed)
	}
}
