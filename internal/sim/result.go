package sim

import (
	"cmp"
	"math"
	"slices"
)

// Result is the outcome of one simulated run. Latencies are in seconds.
// Requests that never got a first token are censored at the end of the run
// (their TTFT is the time they had waited), so percentiles stay finite and
// never flatter a policy.
type Result struct {
	Policy        string      `json:"policy"`
	Queue         string      `json:"queue"`
	QPS           float64     `json:"qps"`
	Seed          uint64      `json:"seed"`
	Replicas      int         `json:"replicas"`
	Requests      int         `json:"requests"` // measured: after warm-up
	Completed     int         `json:"completed"`
	Failed        int         `json:"failed"`
	Unfinished    int         `json:"unfinished"`
	SLOAttainment float64     `json:"slo_attainment"`
	TTFTP50       float64     `json:"ttft_p50_s"`
	TTFTP90       float64     `json:"ttft_p90_s"`
	TTFTP99       float64     `json:"ttft_p99_s"`
	E2EP50        float64     `json:"e2e_p50_s"`
	E2EP90        float64     `json:"e2e_p90_s"`
	CacheHitRate  float64     `json:"cache_hit_rate"` // engine-side: cached / prompt tokens
	LoadCV        float64     `json:"load_cv"`
	Migrations    uint64      `json:"migrations"`
	Truncated     int         `json:"truncated"`
	KeyDepths     map[int]int `json:"key_depths"` // key length in blocks -> requests
	WallSeconds   float64     `json:"wall_seconds"`

	// Realistic engine model, summed over the instances (whole run,
	// warm-up included): preemptions by recompute and the tokens
	// prefilled again because of them.
	Preemptions      int64 `json:"preemptions,omitempty"`
	RecomputedTokens int64 `json:"recomputed_tokens,omitempty"`

	// Windows is SLO attainment by arrival time, in WindowSeconds buckets
	// (all requests, warm-up included): how a scaling event plays out.
	Windows []Window `json:"attainment_over_time,omitempty"`
	// Classes is the attainment per SLO when the measured requests carry
	// more than one (a trace with per-request SLOs), by ascending SLO.
	Classes []Class `json:"slo_classes,omitempty"`
	// TTFTs are the measured requests' TTFTs, ascending (for CDF plots).
	TTFTs    []float64 `json:"-"`
	Timeline []Sample  `json:"-"`
}

// InstanceName is the name of simulated instance i, the index of
// Sample.Load.
func InstanceName(i int) string { return instanceID(i) }

// WindowSeconds is the width of Result.Windows buckets.
const WindowSeconds = 20

// Class is the SLO attainment of the measured requests with one SLO.
type Class struct {
	SLOSeconds float64 `json:"slo_s"`
	Requests   int     `json:"requests"`
	Attainment float64 `json:"slo_attainment"`
}

// Window is the SLO attainment of the requests that arrived in one bucket.
type Window struct {
	Start      float64 `json:"start_s"`
	Requests   int     `json:"requests"`
	Attainment float64 `json:"slo_attainment"`
}

func (c *cluster) result(qps float64) *Result {
	o := c.opt
	res := &Result{Policy: o.Policy, Queue: o.Queue, QPS: qps, Seed: o.Seed, Replicas: o.Replicas, KeyDepths: map[int]int{}}
	var e2e []float64
	var prompt, cached int64
	attained := 0
	classes := map[float64]*Class{}
	for i := range c.reqs {
		r := &c.reqs[i]
		if r.e.Truncated {
			res.Truncated++
		}
		if o.Timeline {
			w := int(r.arrival / WindowSeconds)
			for len(res.Windows) <= w {
				res.Windows = append(res.Windows, Window{Start: float64(len(res.Windows) * WindowSeconds)})
			}
			res.Windows[w].Requests++
			if r.done && r.ttft <= r.slo {
				res.Windows[w].Attainment++
			}
		}
		if i < o.Warmup {
			continue
		}
		res.Requests++
		res.KeyDepths[r.depth]++
		cl := classes[r.slo]
		if cl == nil {
			cl = &Class{SLOSeconds: r.slo}
			classes[r.slo] = cl
		}
		cl.Requests++
		ttft := r.ttft
		switch {
		case r.failed:
			res.Failed++
			ttft = c.now - r.arrival
		case r.done:
			res.Completed++
			e2e = append(e2e, r.e.Done-r.arrival)
			if r.ttft <= r.slo {
				attained++
				cl.Attainment++
			}
		default:
			res.Unfinished++
			if ttft < 0 {
				ttft = c.now - r.arrival
			}
		}
		res.TTFTs = append(res.TTFTs, ttft)
		if r.e.PrefillStart > 0 || r.done {
			prompt += int64(r.e.Tokens)
			cached += int64(r.e.CachedTokens)
		}
	}
	for i := range res.Windows {
		if w := &res.Windows[i]; w.Requests > 0 {
			w.Attainment /= float64(w.Requests)
		}
	}
	for _, s := range c.reps {
		res.Migrations += s.Stats().Migrations
	}
	for _, e := range c.engines {
		st := e.Stats()
		res.Preemptions += st.Preemptions
		res.RecomputedTokens += st.RecomputedTokens
	}
	if len(classes) > 1 {
		for _, cl := range classes {
			cl.Attainment /= float64(cl.Requests)
			res.Classes = append(res.Classes, *cl)
		}
		slices.SortFunc(res.Classes, func(a, b Class) int { return cmp.Compare(a.SLOSeconds, b.SLOSeconds) })
	}
	slices.Sort(res.TTFTs)
	slices.Sort(e2e)
	if res.Requests > 0 {
		res.SLOAttainment = float64(attained) / float64(res.Requests)
	}
	res.TTFTP50, res.TTFTP90, res.TTFTP99 = quantile(res.TTFTs, 0.5), quantile(res.TTFTs, 0.9), quantile(res.TTFTs, 0.99)
	res.E2EP50, res.E2EP90 = quantile(e2e, 0.5), quantile(e2e, 0.9)
	if prompt > 0 {
		res.CacheHitRate = float64(cached) / float64(prompt)
	}
	if c.cvSamples > 0 {
		res.LoadCV = c.cvSum / float64(c.cvSamples)
	}
	res.Timeline = c.timeline
	return res
}

// quantile of ascending xs by the nearest-rank method; NaN when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}
