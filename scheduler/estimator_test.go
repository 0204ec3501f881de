package scheduler

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// bare is a cost configuration whose estimate is the prefill term alone.
func bare(c CostConfig) CostConfig {
	c.RequestTokens, c.StepBase, c.DecodePerSeq, c.MemoryWeight = -1, -1, -1, -1
	return c.withDefaults()
}

func TestEstimatorLearnsAndResistsOutliers(t *testing.T) {
	cfg := bare(CostConfig{PerToken: 0.0001})
	e := newEstimator(&cfg, cfg.PerToken, 1)
	if got := e.ttft(load{ahead: 1000}, 500); math.Abs(got-0.15) > 1e-9 {
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
		e.observe(e.sampleOf(load{ahead: work - work/2}, work/2), ttft)
	}
	if rel := math.Abs(e.cost()-truth) / truth; rel > 0.2 {
		t.Errorf("learned cost = %g, want within 20%% of %g", e.cost(), truth)
	}
	// One huge outlier barely moves it.
	before := e.cost()
	e.observe(e.sampleOf(load{}, 1000), 1000)
	if e.cost() > before*1.05 {
		t.Errorf("one outlier moved cost from %g to %g, want < 5%%", before, e.cost())
	}
	// Garbage is ignored.
	e.observe(e.sampleOf(load{}, 0), 1)
	e.observe(e.sampleOf(load{}, 10), math.NaN())
	e.observe(e.sampleOf(load{}, 10), -1)
	if math.IsNaN(e.cost()) || e.cost() <= 0 {
		t.Errorf("cost = %g after bad observations", e.cost())
	}
}

func TestEstimatorQuadraticAndDisabled(t *testing.T) {
	cfg := bare(CostConfig{PerToken: 0.001, Quadratic: 1e-6, LearnRate: -1})
	e := newEstimator(&cfg, cfg.PerToken, 1)
	if got, want := e.ttft(load{}, 1000), 1.0+1.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("ttft() = %v, want %v", got, want)
	}
	e.observe(e.sampleOf(load{}, 1000), 100)
	if e.cost() != 0.001 {
		t.Errorf("cost = %g with learning off, want unchanged", e.cost())
	}
}

// The terms of the estimate: a fully cached request is not free, a decode
// batch slows every step, a full KV memory multiplies the wait.
func TestEstimatorTerms(t *testing.T) {
	cfg := CostConfig{PerToken: 0.0001, RequestTokens: 100, StepTokens: 1000, StepBase: 0.01, DecodePerSeq: 0.001,
		MemoryKnee: 0.5, MemoryWeight: 2}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken, 1)
	// Idle, fully cached: W = 100 (one request), steps = 1.1.
	got := e.terms(load{}, 0)
	if want := (TTFTTerms{Prefill: 0.01, Decode: 1.1 * 0.01}); math.Abs(got.Prefill-want.Prefill) > 1e-12 ||
		math.Abs(got.Decode-want.Decode) > 1e-12 || got.Memory != 0 || math.Abs(got.Total-0.021) > 1e-12 {
		t.Errorf("idle cached terms = %+v, want prefill 0.01 decode 0.011 memory 0", got)
	}
	// 100 running sequences: every step 0.1 s slower.
	busy := e.terms(load{running: 100}, 0)
	if want := 1.1 * (0.01 + 0.1); math.Abs(busy.Decode-want) > 1e-12 {
		t.Errorf("decode term with 100 running = %v, want %v", busy.Decode, want)
	}
	// Memory at 75%: half way from the knee to full, factor 1 + 2*0.5.
	mem := e.terms(load{memory: 0.75}, 0)
	if math.Abs(mem.Memory-(mem.Prefill+mem.Decode)) > 1e-12 {
		t.Errorf("memory term at 75%% = %v, want %v", mem.Memory, mem.Prefill+mem.Decode)
	}
	if tt := e.ttft(load{ahead: 5000, requests: 3, running: 40, memory: 0.9}, 700); math.Abs(tt-e.terms(load{ahead: 5000, requests: 3, running: 40, memory: 0.9}, 700).Total) > 1e-12 {
		t.Errorf("ttft %v differs from terms().Total", tt)
	}
}

// The step overhead's scale is learned from requests whose TTFT is mostly
// step overhead (cached requests on busy instances), the per-token cost
// from long prefills: both converge from priors off by 3x.
func TestEstimatorLearnsStepScale(t *testing.T) {
	cfg := CostConfig{PerToken: 0.0001, StepTokens: 4096, StepBase: 0.02, DecodePerSeq: 0.001}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken, 1)
	const trueCost, trueScale = 0.0003, 0.33
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < 3000; i++ {
		var l load
		u := 0
		if rng.IntN(2) == 0 {
			u = 2000 + rng.IntN(15000) // a long prefill on a quiet instance
			l.running = rng.IntN(5)
		} else {
			l.running = 20 + rng.IntN(200) // a cached request on a busy one
		}
		s := e.sampleOf(l, u)
		ttft := (trueCost*s.work + trueScale*s.steps) * (0.95 + 0.1*rng.Float64())
		e.observe(s, ttft)
	}
	if rel := math.Abs(e.cost()-trueCost) / trueCost; rel > 0.15 {
		t.Errorf("learned cost = %g, want within 15%% of %g", e.cost(), trueCost)
	}
	if rel := math.Abs(e.stepScale()-trueScale) / trueScale; rel > 0.25 {
		t.Errorf("learned step scale = %g, want within 25%% of %g", e.stepScale(), trueScale)
	}
}

func TestCostConfigRejectsBadLoadTerms(t *testing.T) {
	for _, c := range []struct {
		cfg  CostConfig
		want string
	}{
		{CostConfig{StepTokens: -1}, "cost.step_tokens"},
		{CostConfig{MemoryKnee: 1}, "cost.memory_knee"},
		{CostConfig{MemoryKnee: -0.5}, "cost.memory_knee"},
		{CostConfig{StepBase: math.NaN()}, "cost.step_base"},
		{CostConfig{DecodePerSeq: math.Inf(1)}, "cost.decode_per_seq"},
		{CostConfig{MemoryWeight: math.NaN()}, "cost.memory_weight"},
		{CostConfig{KVTokens: -3}, "cost.kv_tokens"},
	} {
		err := c.cfg.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want one naming %s", c.cfg, err, c.want)
		}
	}
}

// The wait for a sequence slot: none while a slot is free (up to
// MaxSeqs-1 requests occupy the engine), one slot's worth, S/MaxSeqs,
// from exactly MaxSeqs occupied (the new request is the one over), and
// S/MaxSeqs more per request beyond. Pins slotWait's boundary (over =
// occupied - MaxSeqs + 1, over <= 0) and its size (S x over / MaxSeqs),
// in terms() and ttft() alike.
func TestEstimatorSlotWait(t *testing.T) {
	const svc, maxSeqs = 8.0, 4
	cfg := bare(CostConfig{PerToken: 0.0001, MaxSeqs: maxSeqs, ServiceTime: svc})
	e := newEstimator(&cfg, cfg.PerToken, 1)
	base := e.ttft(load{}, 1000) // 0.1 s of prefill, nothing else
	for _, tt := range []struct {
		occupied int
		want     float64 // seconds of slot wait
	}{
		{0, 0},
		{maxSeqs - 1, 0},         // the last free slot
		{maxSeqs, svc / maxSeqs}, // all slots taken: one must free
		{maxSeqs + 1, 2 * svc / maxSeqs},
		{3 * maxSeqs, (2*maxSeqs + 1) * svc / maxSeqs},
	} {
		l := load{occupied: tt.occupied}
		if got := e.slotWait(l); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("slotWait() with %d of %d slots occupied = %v, want %v", tt.occupied, maxSeqs, got, tt.want)
		}
		if got := e.ttft(l, 1000) - base; math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ttft() with %d occupied adds %v to the idle estimate, want the slot wait %v", tt.occupied, got, tt.want)
		}
		if got := e.terms(l, 1000).Memory; math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("terms().Memory with %d occupied = %v, want the slot wait %v", tt.occupied, got, tt.want)
		}
	}
	// S is the learned service time: the wait follows it.
	for range 500 {
		e.observeService(2)
	}
	if got, want := e.slotWait(load{occupied: maxSeqs}), e.serviceTime()/maxSeqs; math.Abs(got-want) > 1e-12 || want > 0.6 {
		t.Errorf("slotWait() after learning S = %v, want %v (S/MaxSeqs with S = %v, near 2)", got, want, e.serviceTime())
	}
}

// A slot wait the estimate counted and the engine then showed is not
// prefill cost: the learned per-token cost stays at the hardware's while
// every measured TTFT carries a wait for a slot, and rises to take in a
// wait the estimate did not count (MaxSeqs above the engine's limit).
func TestEstimatorLearnsAroundSlotWait(t *testing.T) {
	const truth, svc, maxSeqs = 0.0002, 2.0, 4
	for _, tt := range []struct {
		name    string
		counted bool // the estimate knows the limit
	}{{"counted", true}, {"missed", false}} {
		seqs := maxSeqs
		if !tt.counted {
			seqs = 256
		}
		cfg := bare(CostConfig{PerToken: 0.0001, MaxSeqs: seqs, ServiceTime: svc})
		e := newEstimator(&cfg, cfg.PerToken, 1)
		rng := rand.New(rand.NewPCG(2, 2))
		for range 2000 {
			occ := rng.IntN(3 * maxSeqs)
			wait := svc * float64(max(0, occ-maxSeqs+1)) / maxSeqs
			work := 1000 + rng.IntN(4000)
			e.observe(e.sampleOf(load{occupied: occ}, work), truth*float64(work)+wait)
		}
		rel := (e.cost() - truth) / truth
		if tt.counted && math.Abs(rel) > 0.05 {
			t.Errorf("%s: learned cost %g, want within 5%% of %g", tt.name, e.cost(), truth)
		}
		if !tt.counted && rel < 1 {
			t.Errorf("%s: learned cost %g, want the missed waits in it (above 2x %g)", tt.name, e.cost(), truth)
		}
	}
}

// The same boundary as the scheduler sees it: requests dispatched to an
// instance and through prefill occupy its slots until they complete; the
// estimate jumps by S/MaxSeqs when the MaxSeqs-th is running, not before.
func TestSlotWaitThroughScheduler(t *testing.T) {
	const maxSeqs = 4
	cost := bare(CostConfig{PerToken: 0.0001, MaxSeqs: maxSeqs, ServiceTime: 8, LearnRate: -1})
	s, _ := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	probe := req(prompt(9, 9, 0, 2))
	estimate := func() time.Duration { t.Helper(); return estimated(t, s, probe) }
	idle := estimate()
	for running := 1; running <= maxSeqs+1; running++ {
		r := req(prompt(uint64(running), uint64(running), 0, 2))
		route(t, s, r)
		s.FirstToken(r) // through prefill: nothing ahead, one slot held
		want := time.Duration(0)
		if over := running - maxSeqs + 1; over > 0 {
			want = time.Duration(over) * 2 * time.Second // S/MaxSeqs = 2 s per request over
		}
		if got := estimate() - idle; got < want-time.Microsecond || got > want+time.Microsecond {
			t.Errorf("with %d of %d slots running, the estimate grew by %v, want the slot wait %v", running, maxSeqs, got, want)
		}
	}
}

// What the other estimator tests leave open (each found by a mutant that
// lived): the per-request cost counts every request ahead (P x (N+1), not
// P / (N+1)); the q term is in terms() as in ttft(); the first service
// time observed is averaged with the prior and a zero one is ignored; an
// observation with no prefill work teaches neither coefficient.
func TestEstimatorRequestsAheadQuadraticAndService(t *testing.T) {
	cfg := bare(CostConfig{PerToken: 0.0001, Quadratic: 1e-6, ServiceTime: 10})
	cfg.RequestTokens = 100 // bare turns it off
	e := newEstimator(&cfg, cfg.PerToken, 1)
	// W = 500 + 100 x (3+1) = 900; prefill 0.0001 x 900 + 1e-6 x 500^2.
	got := e.terms(load{requests: 3}, 500)
	if want := 0.09 + 0.25; math.Abs(got.Prefill-want) > 1e-12 || math.Abs(got.Total-want) > 1e-12 {
		t.Errorf("terms() with 3 requests ahead = %+v, want prefill and total %v (W = 500 + 100 x 4)", got, want)
	}
	if tt := e.ttft(load{requests: 3}, 500); math.Abs(tt-got.Total) > 1e-12 {
		t.Errorf("ttft() = %v, want terms().Total %v", tt, got.Total)
	}
	e.observeService(0)
	e.observeService(-1)
	if s := e.serviceTime(); s != 10 {
		t.Errorf("serviceTime() after observations of 0 and -1 s = %v, want the prior 10", s)
	}
	e.observeService(20)
	if s := e.serviceTime(); s != 15 {
		t.Errorf("serviceTime() after one 20 s observation = %v, want 15 (the mean of the prior 10 and it)", s)
	}
	// RequestTokens negative: a fully cached request on an idle instance
	// has W = 0; its TTFT is all step overhead, yet it is not learnt from.
	c2 := CostConfig{PerToken: 0.0001, RequestTokens: -1, StepBase: 0.02}.withDefaults()
	e2 := newEstimator(&c2, c2.PerToken, 1)
	s := e2.sampleOf(load{}, 0)
	if s.work != 0 {
		t.Fatalf("sample work = %v, want 0", s.work)
	}
	e2.observe(s, 1)
	if e2.cost() != c2.PerToken || e2.stepScale() != 1 {
		t.Errorf("after an observation with no prefill work: cost %v, step scale %v; want unchanged %v, 1", e2.cost(), e2.stepScale(), c2.PerToken)
	}
}

// Learning takes the q term and the memory factor out of an observed TTFT
// before comparing it with the linear estimate: observations made of a
// known cost plus a q term, under memory pressure, teach exactly that
// cost. Pins observe's t = ttft/(1+mem) - q x u^2 (each operator mutated,
// the learned cost drifts from the truth).
func TestEstimatorLearnsWithoutTheQuadraticTerm(t *testing.T) {
	cfg := bare(CostConfig{PerToken: 0.0001, Quadratic: 1e-8, LearnRate: 0.2})
	cfg.MemoryWeight, cfg.MemoryKnee = 2, 0.5
	e := newEstimator(&cfg, cfg.PerToken, 1)
	const truth = 0.0002
	for i := range 400 {
		u := 1000 + 37*(i%50)
		l := load{memory: 0.75} // factor 1 + 2 x 0.5 = 2
		s := e.sampleOf(l, u)
		ttft := (truth*s.work + cfg.Quadratic*float64(u*u)) * 2
		e.observe(s, ttft)
	}
	if rel := math.Abs(e.cost()-truth) / truth; rel > 0.01 {
		t.Errorf("learned cost = %g, want %g within 1%% (q term and memory factor taken out)", e.cost(), truth)
	}
}

// S is the mean of its prior, counted as one completion, and the
// completions seen until they number svcWindow; after that one completion
// moves it by 1/svcWindow of its distance, so that one slow request does
// not double the slot wait.
func TestServiceTimeWarmsUpFromItsPrior(t *testing.T) {
	cfg := CostConfig{PerToken: 0.0001, ServiceTime: 20}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken, 1)
	if s := e.serviceTime(); s != 20 {
		t.Fatalf("serviceTime() before any completion = %v, want the prior 20", s)
	}
	sum := 20.0
	for i := 1; i < svcWindow; i++ {
		d := 1 + float64(i%2) // 2, 1, 2, 1, ...
		e.observeService(d)
		sum += d
		if s, want := e.serviceTime(), sum/float64(i+1); math.Abs(s-want) > 1e-9 {
			t.Fatalf("serviceTime() after %d completions = %v, want %v (the mean of the prior and them)", i, s, want)
		}
	}
	before := e.serviceTime()
	if before > 2 {
		t.Fatalf("serviceTime() after %d completions of 1-2 s = %v, want below 2 (the prior's weight 1/%d)", svcWindow-1, before, svcWindow)
	}
	e.observeService(51.5)
	if s, want := e.serviceTime(), before+(51.5-before)/svcWindow; math.Abs(s-want) > 1e-9 {
		t.Errorf("serviceTime() after a 51.5 s completion past the window = %v, want %v (a 1/%d step)", s, want, svcWindow)
	}
}

// Completions counted from several goroutines at once (instances sharing
// one estimator) keep S within what was observed.
func TestServiceTimeConcurrentObservations(t *testing.T) {
	cfg := CostConfig{PerToken: 0.0001, ServiceTime: 20}.withDefaults()
	e := newEstimator(&cfg, cfg.PerToken, 1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				e.observeService(1 + float64(g)/4)
			}
		}()
	}
	wg.Wait()
	if s := e.serviceTime(); s < 1 || s > 1.75 {
		t.Errorf("serviceTime() after 4,000 completions of 1-1.75 s = %v, want within [1, 1.75]", s)
	}
	if n := e.svcN.Load(); n != 4000 {
		t.Errorf("completions counted = %d, want 4000", n)
	}
}
