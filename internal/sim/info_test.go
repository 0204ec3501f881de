package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCostPriorIsLearned checks that the TTFT estimator's online learning
// corrects a prior that is 3x too high or too low: it ends near where it
// ends from the exact prior, while without learning it stays off.
func TestCostPriorIsLearned(t *testing.T) {
	tr := smallTrace(t, 3000)
	run := func(factor, learn float64) float64 {
		t.Helper()
		o := Options{Policy: "dualmap", Instances: 4, Warmup: 100, Info: Info{CostPrior: factor}}
		o.Scheduler.Cost.LearnRate = learn
		res, err := Simulate(tr, 6, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.CostPerToken
	}
	prior := 0.00016 // the default profile's PrefillPerToken
	exact := run(1, 0)
	for _, f := range []float64{3, 1.0 / 3} {
		got := run(f, 0)
		t.Logf("prior x%.2f: learned %.3g s/token", f, got)
		if r := math.Abs(math.Log(got / exact)); r > math.Log(1.25) {
			t.Errorf("prior x%.2f: learned %.3g s/token, exact prior learned %.3g: not corrected", f, got, exact)
		}
		if fixed := run(f, -1); math.Abs(fixed-f*prior) > 1e-12 {
			t.Errorf("prior x%.2f without learning: %.3g, want %.3g", f, fixed, f*prior)
		}
	}
	t.Logf("learned cost from the exact prior: %.3g s/token (prior %.3g)", exact, prior)
}

// TestCacheIndexDropAndDelay checks that a router whose cache index loses
// or delays its records finds fewer cache hits, deterministically.
func TestCacheIndexDropAndDelay(t *testing.T) {
	tr := smallTrace(t, 2000)
	run := func(info Info) *Result {
		t.Helper()
		res, err := Simulate(tr, 3, Options{Policy: "preble", Instances: 4, Warmup: 100, Info: info})
		if err != nil {
			t.Fatal(err)
		}
		res.WallSeconds, res.TTFTs = 0, nil
		return res
	}
	exact := run(Info{})
	dropped := run(Info{IndexDrop: 1})
	late := run(Info{IndexDelay: time.Hour})
	half := run(Info{IndexDrop: 0.5})
	if dropped.CacheHitRate > exact.CacheHitRate-0.05 || late.CacheHitRate > exact.CacheHitRate-0.05 {
		t.Errorf("hit rate exact %.3f, every record dropped %.3f, delayed 1 h %.3f: want both clearly lower",
			exact.CacheHitRate, dropped.CacheHitRate, late.CacheHitRate)
	}
	if half.CacheHitRate >= exact.CacheHitRate || half.CacheHitRate <= dropped.CacheHitRate {
		t.Errorf("hit rate with half the records dropped %.3f, want between %.3f and %.3f",
			half.CacheHitRate, dropped.CacheHitRate, exact.CacheHitRate)
	}
	if again := run(Info{IndexDrop: 0.5}); !reflect.DeepEqual(again, half) {
		t.Error("two runs with index_drop=0.5 and the same seed differ")
	}
	if zero := run(Info{IndexDelay: 0, IndexDrop: 0}); !reflect.DeepEqual(zero, exact) {
		t.Error("zero delay and drop differ from exact information")
	}
}

// TestMetricsPoll checks that polled engine metrics are deterministic and
// that polling rarely is not the same as exact.
func TestMetricsPoll(t *testing.T) {
	tr := smallTrace(t, 2000)
	run := func(poll time.Duration) *Result {
		t.Helper()
		res, err := Simulate(tr, 8, Options{Policy: "least-loaded", Queue: QueueEngine, Instances: 4, Warmup: 100, Info: Info{MetricsPoll: poll}})
		if err != nil {
			t.Fatal(err)
		}
		res.WallSeconds, res.TTFTs = 0, nil
		return res
	}
	a, b := run(2*time.Second), run(2*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs polling every 2 s differ")
	}
	if exact := run(0); reflect.DeepEqual(exact, a) {
		t.Error("polling every 2 s gives exactly the exact-metrics result: the poll has no effect")
	}
}

func TestInfoValidate(t *testing.T) {
	for _, tt := range []struct {
		info Info
		key  string
	}{
		{Info{CostPrior: -1}, "cost_prior"},
		{Info{CostPrior: math.NaN()}, "cost_prior"},
		{Info{IndexDelay: -time.Second}, "index_delay"},
		{Info{IndexDrop: 1.5}, "index_drop"},
		{Info{IndexDrop: -0.1}, "index_drop"},
	} {
		_, err := Options{Info: tt.info}.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%+v: error %v, want one naming %s", tt.info, err, tt.key)
		}
	}
	for _, s := range []string{"dualmap(cost_prior=-2)", "dualmap(index_drop=2)", "dualmap(index_delay=-5)", "dualmap(metrics_poll=NaN)"} {
		if _, err := ParseSpec(s); err == nil {
			t.Errorf("ParseSpec(%q) accepted", s)
		}
	}
	sp, err := ParseSpec("preble(cost_prior=3,index_delay=200,index_drop=0.1,metrics_poll=500)")
	if err != nil {
		t.Fatal(err)
	}
	o := sp.apply(Options{})
	want := Info{CostPrior: 3, IndexDelay: 200 * time.Millisecond, IndexDrop: 0.1, MetricsPoll: 500 * time.Millisecond}
	if o.Info != want {
		t.Errorf("apply: %+v, want %+v", o.Info, want)
	}
}
