package scheduler

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestEstimatorLearnsAndResistsOutliers(t *testing.T) {
	cfg := CostConfig{PerToken: 0.0001}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken)
	if got := e.ttft(1000, 500); math.Abs(got-0.15) > 1e-9 {
		t.Fatalf("ttft() = %v, want 0.15", got)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	const truth = 0.0003 // the real hardware is 3x slower than the profile
	for i := 0; i < 300; i++ {
		work := 1000 + rng.IntN(20000)
		ttft := truth * float64(work) * (0.9 + 0.2*rng.Float64())
		if i%10 == 0 {
			ttft *= 50 // an outlier: stuck behind something
		}
		e.observe(work, work/2, ttft)
	}
	if rel := math.Abs(e.cost()-truth) / truth; rel > 0.2 {
		t.Errorf("learned cost = %g, want within 20%% of %g", e.cost(), truth)
	}
	// One huge outlier barely moves it.
	before := e.cost()
	e.observe(1000, 1000, 1000)
	if e.cost() > before*1.05 {
		t.Errorf("one outlier moved cost from %g to %g, want < 5%%", before, e.cost())
	}
	// Garbage is ignored.
	e.observe(0, 0, 1)
	e.observe(100, 10, math.NaN())
	e.observe(100, 10, -1)
	if math.IsNaN(e.cost()) || e.cost() <= 0 {
		t.Errorf("cost = %g after bad observations", e.cost())
	}
}

func TestEstimatorQuadraticAndDisabled(t *testing.T) {
	cfg := CostConfig{PerToken: 0.001, Quadratic: 1e-6, LearnRate: -1}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken)
	if got, want := e.ttft(0, 1000), 1.0+1.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("ttft() = %v, want %v", got, want)
	}
	e.observe(1000, 1000, 100)
	if e.cost() != 0.001 {
		t.Errorf("cost = %g with learning off, want unchanged", e.cost())
	}
}
