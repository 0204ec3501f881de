package replay

import (
	"slices"
	"time"
)

// Percentiles are nearest-rank percentiles of a set of durations: Pq is
// the smallest value with at least q% of the set at or below it. All are 0
// for an empty set.
type Percentiles struct {
	P50, P90, P99 time.Duration
}

// InstanceSummary summarises the requests one instance answered.
type InstanceSummary struct {
	Requests, OK, Failed int
	// HitRate is as Summary.HitRate, over this instance's requests.
	HitRate float64
	// TTFTP50 is the median TTFT of its successful requests.
	TTFTP50 time.Duration
}

// Summary summarises the results of a replay.
type Summary struct {
	// Requests counts the requests sent, OK and Failed those that
	// succeeded and failed (see Result.OK), Delayed those that waited for
	// a concurrency slot (Result.Delayed).
	Requests, OK, Failed, Delayed int
	// Duration runs from the start of the replay to the end of the last
	// request.
	Duration time.Duration
	// TargetQPS is Options.QPS, or when that is 0 the mean rate of the
	// replayed requests' own timestamps (0 when not defined). Summarize
	// leaves it 0; Run sets it.
	TargetQPS float64
	// AchievedQPS is the rate at which requests were sent, defined as
	// trace.Stats defines a trace's: (Requests-1) / (last send - first
	// send); 0 with fewer than 2 requests.
	AchievedQPS float64
	// TTFT and E2E are percentiles over the successful requests.
	TTFT, E2E Percentiles
	// HitRate is the prefix-cache hit rate the server reports: the sum of
	// cached tokens over the sum of prompt tokens of the successful
	// requests that reported usage, of which there are UsageReported (0
	// when none did).
	HitRate       float64
	UsageReported int
	// PerInstance summarises the requests per Result.Instance; requests
	// that named no instance are left out.
	PerInstance map[string]InstanceSummary
	// ByStatus counts requests by HTTP status, 0 for no response.
	ByStatus map[int]int
}

// Summarize summarises results as Run does, except for TargetQPS.
func Summarize(results []Result) Summary {
	s := Summary{Requests: len(results), PerInstance: map[string]InstanceSummary{}, ByStatus: map[int]int{}}
	var ttft, e2e []time.Duration
	var cached, prompt int
	type acc struct {
		sum            InstanceSummary
		cached, prompt int
		ttft           []time.Duration
	}
	inst := map[string]*acc{}
	first, last := time.Duration(-1), time.Duration(0)
	for _, r := range results {
		s.ByStatus[r.Status]++
		s.Duration = max(s.Duration, r.Sent+r.E2E)
		if first < 0 || r.Sent < first {
			first = r.Sent
		}
		last = max(last, r.Sent)
		if r.Delayed {
			s.Delayed++
		}
		a := inst[r.Instance]
		if a == nil && r.Instance != "" {
			a = &acc{}
			inst[r.Instance] = a
		}
		if a != nil {
			a.sum.Requests++
		}
		if !r.OK() {
			s.Failed++
			if a != nil {
				a.sum.Failed++
			}
			continue
		}
		s.OK++
		ttft, e2e = append(ttft, r.TTFT), append(e2e, r.E2E)
		if r.Usage {
			s.UsageReported++
			cached, prompt = cached+r.CachedTokens, prompt+r.PromptTokens
		}
		if a != nil {
			a.sum.OK++
			a.ttft = append(a.ttft, r.TTFT)
			if r.Usage {
				a.cached, a.prompt = a.cached+r.CachedTokens, a.prompt+r.PromptTokens
			}
		}
	}
	if len(results) >= 2 && last > first {
		s.AchievedQPS = float64(len(results)-1) / (last - first).Seconds()
	}
	s.TTFT, s.E2E = PercentilesOf(ttft), PercentilesOf(e2e)
	s.HitRate = ratio(cached, prompt)
	for name, a := range inst {
		a.sum.HitRate = ratio(a.cached, a.prompt)
		a.sum.TTFTP50 = PercentilesOf(a.ttft).P50
		s.PerInstance[name] = a.sum
	}
	return s
}

func ratio(a, b int) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// PercentilesOf sorts ds and returns its percentiles.
func PercentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q int) time.Duration {
		k := (q*len(ds) + 99) / 100 // ceil(q/100 * n), >= 1
		return ds[k-1]
	}
	return Percentiles{P50: at(50), P90: at(90), P99: at(99)}
}
