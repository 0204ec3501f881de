package scheduler

import (
	"cmp"
	"math"
)

// Preble's E2 scheduler (Srivatsa et al., "Preble: Efficient Distributed
// Prompt Scheduling for LLM Serving", ICLR 2025), as far as a router without
// engine internals can follow it:
//   - exploit: when some instances hold more than `exploit` of the prompt,
//     choose among them;
//   - explore: otherwise choose among all ready instances;
//   - either way by load cost = the instance's recent prefill load (uncached
//     tokens dispatched to it, decayed with a 3-minute time constant, standing
//     in for Preble's 3-minute history window) plus this request's cost
//     there: the TTFT estimate every policy shares (estimator.go), in
//     prefill tokens, less the queue the recent load already counts. So a
//     cached request still costs its per-request share, and an instance's
//     decode batch, memory pressure and full sequence slots count as in
//     Preble's own load cost, which includes decode;
//   - rebalance: when the chosen instance's load cost exceeds `imbalance`
//     times the lowest in the pool, the lowest takes it.
type preble struct {
	Exploit   float64 `param:"exploit"`   // default 0.5, in [0, 1]
	Imbalance float64 `param:"imbalance"` // default 1.5, in [1, 100]
}

// prebleWindow is the time constant of the recent-load signal.
const prebleWindow = 180e9 // 3 minutes in nanoseconds

func init() { register("preble", func() configurable { return &preble{Exploit: 0.5, Imbalance: 1.5} }) }

func (p *preble) Validate() error {
	return cmp.Or(
		inRange("exploit", p.Exploit, 0, 1),
		inRange("imbalance", p.Imbalance, 1, 100),
	)
}

func (p *preble) pick(v *view, r *Request, cands []int32) (choice, error) {
	maxCached := 0
	for i := range v.members {
		if v.ready[i] {
			maxCached = max(maxCached, v.cached(int32(i), r))
		}
	}
	exploit := float64(maxCached) > p.Exploit*float64(r.Tokens)
	best, bestCost := int32(-1), math.Inf(1)
	least, leastCost := int32(-1), math.Inf(1)
	for i, in := range v.members {
		if !v.ready[i] {
			continue
		}
		c := v.cached(int32(i), r)
		cost := in.recentLoad(v.now, prebleWindow) + max(v.ttft(int32(i), r, c)/in.est.cost()-float64(in.ahead()), 0)
		if cost < leastCost {
			least, leastCost = int32(i), cost
		}
		if exploit && float64(c) <= p.Exploit*float64(r.Tokens) {
			continue
		}
		if cost < bestCost {
			best, bestCost = int32(i), cost
		}
	}
	if best < 0 {
		return choice{}, ErrNoEndpoint
	}
	if bestCost > p.Imbalance*leastCost {
		return choice{inst: least, fallback: best, reason: ReasonLoad}, nil
	}
	if exploit {
		return choice{inst: best, fallback: -1, reason: ReasonCache}, nil
	}
	return choice{inst: best, fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*preble)(nil)
