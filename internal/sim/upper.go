package sim

import (
	"math"
	"slices"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// Attainment levels of the bounds: goodput needs 90% of the requests on
// time, and the overload argument of docs/evaluation.md asks about 50%.
const (
	goodputLevel  = 0.9
	overloadLevel = 0.5
)

// bounds are what no router can beat on a trace, whatever it knows: the
// cache hit rate of an infinite single cache, and the request rates at which
// the pool would be busy all the time even with that hit rate.
//
// A router may give up on the requests it cannot serve on time, so a rate
// that needs only a fraction f of the requests on time is bounded by the
// cheapest f of them: at rate q the pool must prefill at least f·q requests
// per second, at least the f·n cheapest of the n measured ones. Each
// request's cost counts as cached every block that any earlier request of
// the trace had, whether or not that request was served: every block of a
// set of requests is then counted in at most one of them (its first
// occurrence), so the cost of any set is at most the blocks it needs
// computed, whatever order and placement the router chose.
type bounds struct {
	// hitRate is in the units of Result.CacheHitRate: prompts truncated to
	// the profile's max model length, hits counted as the longest prefix of
	// blocks any earlier request had (warm-up included), at most all but
	// one token (the engine always computes one).
	hitRate float64
	// prefillQPS is the rate at which the instances spend all their time
	// on all the measured requests' uncached prompt tokens (at hitRate).
	prefillQPS float64
	// workQPS also counts decode, one DecodePerSeq per output token after
	// the first: above it the pool falls behind on the whole work. A finite
	// trace can still be served above it for a while (decode backlogs while
	// prefill keeps first tokens on time), so goodput may exceed it.
	workQPS float64
	// prefill90 and prefill50 are hard bounds: no run at a higher rate can
	// reach 90% (50%) SLO attainment (see attainmentAt). -1: none (the
	// cheapest requests' prefill fits in the slack of the last SLO).
	prefill90, prefill50 float64
	// work90 and work50 are the steady-state work bounds over the cheapest
	// 90% (50%) of the requests by prefill and decode time; like workQPS
	// not a hard bound on a finite trace.
	work90, work50 float64

	// For attainmentAt: the prefill seconds of the measured requests that
	// can meet their own SLO at all, ascending, as prefix sums.
	prefillCum []float64
	measured   int     // measured requests
	span       float64 // (last arrival - first measured arrival) / trace span x (requests - 1)
	slack      float64 // the largest SLO in seconds: the last deadline's distance from the last arrival
	instances  float64
}

// upperBounds computes the bounds of tr's measured requests for o's profile
// and instance count (step overheads and the attention term left out, so
// the rates are upper bounds).
func upperBounds(tr *trace.Trace, o Options) bounds {
	p := o.Profile
	bs, maxLen := p.BlockSize, p.MaxModelLen
	warm := max(o.Warmup, 0)
	seen := make(map[uint64]struct{}, len(tr.Requests)*8)
	var prompt, cached int64
	var prefill, decode float64
	var pre, work []float64 // per measured request; pre only those that can meet their SLO
	slo := o.SLO.Seconds()
	for i, r := range tr.Requests {
		tokens, blocks := r.InputTokens, r.Blocks
		if maxLen > 0 && tokens > maxLen {
			tokens = maxLen
			blocks = blocks[:min(len(blocks), (maxLen+bs-1)/bs)]
		}
		hit := 0
		for hit < len(blocks) {
			if _, ok := seen[blocks[hit]]; !ok {
				break
			}
			hit++
		}
		for _, b := range blocks {
			seen[b] = struct{}{}
		}
		if i < warm {
			continue
		}
		c := min(hit*bs, tokens-1)
		prompt += int64(tokens)
		cached += int64(c)
		pf := float64(tokens-c) * p.PrefillPerToken
		dc := float64(max(r.OutputTokens, 1)-1) * p.DecodePerSeq
		prefill += pf
		decode += dc
		own := slo
		if r.SLO > 0 {
			own = r.SLO.Seconds()
		}
		if pf <= own { // a request whose prefill alone takes longer never attains
			pre = append(pre, pf)
		}
		work = append(work, pf+dc)
	}
	var b bounds
	n := len(work)
	if prompt == 0 || n == 0 {
		return b
	}
	b.measured = n
	b.instances = float64(o.Instances)
	b.hitRate = float64(cached) / float64(prompt)
	if prefill > 0 {
		b.prefillQPS = b.instances * float64(n) / prefill
	}
	if prefill+decode > 0 {
		b.workQPS = b.instances * float64(n) / (prefill + decode)
	}
	b.slack = slo
	for _, r := range tr.Requests[min(warm, len(tr.Requests)):] {
		b.slack = max(b.slack, r.SLO.Seconds())
	}
	last := len(tr.Requests) - 1
	if d := tr.Requests[last].Arrival.Seconds(); d > 0 {
		b.span = (d - tr.Requests[min(warm, last)].Arrival.Seconds()) / d * float64(last)
	} else { // no duration: the simulator spaces the requests evenly
		b.span = float64(last - min(warm, last))
	}
	slices.Sort(pre)
	b.prefillCum = cumulative(pre)
	slices.Sort(work)
	workCum := cumulative(work)
	b.prefill90, b.prefill50 = b.prefillAt(goodputLevel), b.prefillAt(overloadLevel)
	b.work90, b.work50 = b.steady(workCum, goodputLevel), b.steady(workCum, overloadLevel)
	return b
}

func cumulative(xs []float64) []float64 {
	out := make([]float64, len(xs))
	s := 0.0
	for i, x := range xs {
		s += x
		out[i] = s
	}
	return out
}

// need is how many measured requests attainment f needs.
func (b *bounds) need(f float64) int { return int(math.Ceil(f*float64(b.measured) - 1e-9)) }

// prefillAt is the highest rate at which attainment f is possible: the
// cheapest f·n requests' prefill S must fit in the instances' time from the
// first measured arrival to the last deadline, S <= I·(span/q + slack).
// 0 when fewer than f·n requests can meet their SLO at all; -1 when S fits
// in I·slack alone (no bound).
func (b *bounds) prefillAt(f float64) float64 {
	k := b.need(f)
	if k == 0 {
		return -1
	}
	if k > len(b.prefillCum) {
		return 0
	}
	s := b.prefillCum[k-1]
	if s <= b.instances*b.slack {
		return -1
	}
	return b.instances * b.span / (s - b.instances*b.slack)
}

// steady is the steady-state rate at which the cheapest f·n costs keep the
// instances busy all the time: I·n / S.
func (b *bounds) steady(cum []float64, f float64) float64 {
	k := b.need(f)
	if k == 0 || k > len(cum) || cum[k-1] <= 0 {
		return 0
	}
	return b.instances * float64(b.measured) / cum[k-1]
}

// attainmentAt is the highest SLO attainment any router can reach at rate
// q (the sweep's rescaled rate): the largest share of the measured requests
// whose cheapest prefill fits in I·(span/q + slack). A run above it is a
// bug in the simulator.
func (b *bounds) attainmentAt(q float64) float64 {
	if b.measured == 0 || q <= 0 {
		return 1
	}
	budget := b.instances * (b.span/q + b.slack)
	k, _ := slices.BinarySearch(b.prefillCum, math.Nextafter(budget, math.Inf(1)))
	return float64(k) / float64(b.measured)
}
