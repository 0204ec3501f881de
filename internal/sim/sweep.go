package sim

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// Sweep runs every policy variant in every queue mode at every request rate
// and seed.
type Sweep struct {
	Trace  *trace.Trace
	Specs  []Spec
	Queues []string
	// QPS are the rates to run. Empty: auto-range from AutoStart in steps
	// of AutoStep until every variant's attainment is below 50% (at most
	// AutoMax points).
	QPS       []float64
	AutoStart float64 // default 1
	AutoStep  float64 // default 0.5
	AutoMax   int     // default 30
	Seeds     []uint64
	Base      Options
	Workers   int                       // default GOMAXPROCS
	Progress  func(done, total int)     // called after each run; may be nil
	OnResult  func(r *Result)           // called after each run; may be nil
	progress  struct{ done, total int } // guarded by mu
	mu        sync.Mutex
}

// Goodput is the highest request rate a variant serves with at least 90%
// SLO attainment.
type Goodput struct {
	Policy string  `json:"policy"`
	Queue  string  `json:"queue"`
	QPS    float64 `json:"qps"`
	// Interpolated is true when QPS lies between two swept points (linear
	// interpolation of attainment to the 90% crossing).
	Interpolated bool `json:"interpolated"`
	// Note says when the value is a bound: "below the lowest point" or
	// "at or above the highest point".
	Note string `json:"note,omitempty"`
	// Seeds, with several seeds, is the spread of the goodput of a single
	// seed's runs.
	Seeds *Spread `json:"seeds,omitempty"`
}

// Spread is the range of a figure over seeds.
type Spread struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Report is a whole sweep's output (the shape of `dualmap sim --json`).
type Report struct {
	Trace             string  `json:"trace"`
	Requests          int     `json:"requests"`
	Instances         int     `json:"instances"`
	Profile           string  `json:"profile"`
	SLOSeconds        float64 `json:"slo_seconds"`
	Replicas          int     `json:"replicas"`
	SyncInterval      string  `json:"sync_interval,omitempty"`
	Warmup            int     `json:"warmup"`
	UpperBoundHitRate float64 `json:"upper_bound_hit_rate"`
	// PrefillBoundQPS and WorkBoundQPS: see the bounds type.
	PrefillBoundQPS float64   `json:"prefill_bound_qps"`
	WorkBoundQPS    float64   `json:"work_bound_qps"`
	Runs            []*Result `json:"runs"`
	Goodput         []Goodput `json:"goodput"`

	// EngineModel is the engine model when it is not the legacy one (then
	// empty, so that legacy reports read as before); PrefillNoise the
	// profile's prefill_noise.
	EngineModel  string  `json:"engine_model,omitempty"`
	PrefillNoise float64 `json:"prefill_noise,omitempty"`
}

type job struct {
	spec  Spec
	queue string
	qps   float64
	seed  uint64
}

// Run executes the sweep.
func (sw *Sweep) Run() (*Report, error) {
	base, err := sw.Base.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(sw.Specs) == 0 || len(sw.Queues) == 0 {
		return nil, fmt.Errorf("sim: a sweep needs at least one policy and one queue mode")
	}
	for _, q := range sw.Queues {
		if _, err := (Options{Queue: q, Profile: base.Profile}).withDefaults(); err != nil {
			return nil, err
		}
	}
	seeds := sw.Seeds
	if len(seeds) == 0 {
		seeds = []uint64{base.Seed}
	}
	rep := &Report{
		Trace: sw.Trace.Source, Requests: len(sw.Trace.Requests), Instances: base.Instances,
		Profile: base.Profile.Name, SLOSeconds: base.SLO.Seconds(), Replicas: base.Replicas,
		Warmup:      max(base.Warmup, 0),
		EngineModel: engineModel(base.Profile), PrefillNoise: base.Profile.PrefillNoise,
	}
	b := upperBounds(sw.Trace, base)
	rep.UpperBoundHitRate, rep.PrefillBoundQPS, rep.WorkBoundQPS = b.hitRate, b.prefillQPS, b.workQPS
	if base.Replicas > 1 {
		rep.SyncInterval = base.SyncInterval.String()
	}
	perPoint := len(sw.Specs) * len(sw.Queues) * len(seeds)
	if len(sw.QPS) > 0 {
		sw.progress.total = perPoint * len(sw.QPS)
		var jobs []job
		for _, q := range sw.QPS {
			jobs = append(jobs, sw.jobs(q, seeds)...)
		}
		runs, err := sw.execute(jobs, base)
		if err != nil {
			return nil, err
		}
		rep.Runs = runs
	} else {
		start, step, most := sw.AutoStart, sw.AutoStep, sw.AutoMax
		if start <= 0 {
			start = 1
		}
		if step <= 0 {
			step = 0.5
		}
		if most <= 0 {
			most = 30
		}
		sw.progress.total = perPoint * 10 // a guess; grows as points are added
		for i := 0; i < most; i++ {
			q := math.Round((start+float64(i)*step)*1000) / 1000
			runs, err := sw.execute(sw.jobs(q, seeds), base)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, runs...)
			if allBelow(runs, 0.5) {
				break
			}
			if i+1 >= 10 {
				sw.mu.Lock()
				sw.progress.total += perPoint
				sw.mu.Unlock()
			}
		}
	}
	rep.Goodput = goodputs(rep.Runs, 0.9)
	return rep, nil
}

func (sw *Sweep) jobs(qps float64, seeds []uint64) []job {
	var jobs []job
	for _, sp := range sw.Specs {
		for _, q := range sw.Queues {
			for _, seed := range seeds {
				jobs = append(jobs, job{spec: sp, queue: q, qps: qps, seed: seed})
			}
		}
	}
	return jobs
}

// allBelow reports whether every variant's mean attainment is below x.
func allBelow(runs []*Result, x float64) bool {
	for _, g := range ByVariant(runs) {
		if meanAttainment(g) >= x {
			return false
		}
	}
	return true
}

func (sw *Sweep) execute(jobs []job, base Options) ([]*Result, error) {
	workers := sw.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				o := j.spec.apply(base)
				o.Queue, o.Seed = j.queue, j.seed
				r, err := Simulate(sw.Trace, j.qps, o)
				if err != nil {
					errs[i] = fmt.Errorf("%s/%s at %g QPS: %w", j.spec.Label, j.queue, j.qps, err)
					continue
				}
				r.Policy = j.spec.Label
				results[i] = r
				sw.mu.Lock()
				sw.progress.done++
				done, total := sw.progress.done, sw.progress.total
				if sw.OnResult != nil {
					sw.OnResult(r)
				}
				if sw.Progress != nil {
					sw.Progress(done, max(total, done))
				}
				sw.mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// ByVariant splits runs by (policy, queue), in their first appearance's
// order, each group sorted by QPS then seed.
func ByVariant(runs []*Result) [][]*Result {
	var keys []string
	m := map[string][]*Result{}
	for _, r := range runs {
		k := r.Policy + "\x00" + r.Queue
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
		m[k] = append(m[k], r)
	}
	out := make([][]*Result, 0, len(keys))
	for _, k := range keys {
		g := m[k]
		slices.SortStableFunc(g, func(a, b *Result) int {
			switch {
			case a.QPS < b.QPS:
				return -1
			case a.QPS > b.QPS:
				return 1
			}
			return int(a.Seed) - int(b.Seed)
		})
		out = append(out, g)
	}
	return out
}

func meanAttainment(runs []*Result) float64 {
	s := 0.0
	for _, r := range runs {
		s += r.SLOAttainment
	}
	return s / float64(len(runs))
}

// AttainmentCurve returns a group of ByVariant's mean attainment per QPS,
// ascending.
func AttainmentCurve(g []*Result) (qps, att []float64) {
	for i := 0; i < len(g); {
		j := i
		for j < len(g) && g[j].QPS == g[i].QPS {
			j++
		}
		qps = append(qps, g[i].QPS)
		att = append(att, meanAttainment(g[i:j]))
		i = j
	}
	return qps, att
}

// goodputs computes each variant's goodput at attainment level x, from its
// mean attainment over seeds and, with several seeds, from each seed's alone
// (the spread: where the attainment curve runs close to x, a small change
// moves the crossing a long way).
func goodputs(runs []*Result, x float64) []Goodput {
	var out []Goodput
	for _, g := range ByVariant(runs) {
		gp := Goodput{Policy: g[0].Policy, Queue: g[0].Queue}
		qps, att := AttainmentCurve(g)
		gp.QPS, gp.Interpolated, gp.Note = crossing(qps, att, x)
		seeds := map[uint64][]*Result{}
		for _, r := range g {
			seeds[r.Seed] = append(seeds[r.Seed], r)
		}
		if len(seeds) > 1 {
			sp := &Spread{Min: math.Inf(1), Max: math.Inf(-1)}
			for _, sg := range seeds {
				sq, sa := AttainmentCurve(sg)
				q, _, _ := crossing(sq, sa, x)
				sp.Min, sp.Max = min(sp.Min, q), max(sp.Max, q)
			}
			gp.Seeds = sp
		}
		out = append(out, gp)
	}
	return out
}

// crossing returns the highest rate at which att (ascending qps) is at least
// x, interpolated linearly towards the next point, and a note when that is
// a bound of the sweep.
func crossing(qps, att []float64, x float64) (q float64, interpolated bool, note string) {
	best := -1
	for i := range qps {
		if att[i] >= x {
			best = i
		}
	}
	switch {
	case best < 0:
		return 0, false, "below the lowest point"
	case best == len(qps)-1:
		return qps[best], false, "at or above the highest point"
	}
	a0, a1 := att[best], att[best+1]
	q = qps[best]
	if a0 > a1 {
		q += (qps[best+1] - qps[best]) * (a0 - x) / (a0 - a1)
	}
	return q, q != qps[best], ""
}

// Elapsed formats a duration for reports.
func Elapsed(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
