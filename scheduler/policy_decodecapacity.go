package scheduler

import "cmp"

// Decode Capacity: the decode half of a prefill/decode pool. A request's
// decode instance runs its sequence for every output token, so the choice
// is the ready instance where one more sequence decodes soonest and
// fastest, by the estimator's own model of a step (estimator.go): the step
// time with one more running sequence, k x (StepBase + DecodePerSeq x
// (R + 1)), scaled by the KV memory pressure, plus the wait for a sequence
// slot and the prefill work already ahead there (c x A: prompts prefilled
// locally stall its decode batch). The cached prefix only breaks ties:
// among the instances within tie of the lowest figure, the one holding the
// longest prefix of the prompt wins (it may skip the remote prefill, or
// pull less of the KV), then the lower figure. Looks at every ready
// instance, not only the ring candidates.
//
// Parameters:
//   - tie (default 0.05, in [0, 1]): figures within this fraction of the
//     lowest count as equal.
type decodeCapacity struct {
	Tie float64 `param:"tie"`
}

func init() {
	register("decode-capacity", func() configurable { return &decodeCapacity{Tie: 0.05} })
}

func (d *decodeCapacity) Validate() error { return cmp.Or(inRange("tie", d.Tie, 0, 1)) }

// decodeCost is the figure of a new sequence on in, in seconds.
func decodeCost(in *instance) float64 {
	e, l := in.est, in.load()
	step := e.stepScale() * (e.stepBase + e.perSq*float64(l.running+1))
	return step*(1+e.memFactor(l.memory)) + e.slotWait(l) + e.cost()*float64(l.ahead)
}

func (d *decodeCapacity) pick(v *view, r *Request, cands []int32) (choice, error) {
	best, bestCost := int32(-1), 0.0
	for i, in := range v.members {
		if !v.ready[i] {
			continue
		}
		if c := decodeCost(in); best < 0 || c < bestCost {
			best, bestCost = int32(i), c
		}
	}
	if best < 0 {
		return choice{}, ErrNoEndpoint
	}
	reason := ReasonPolicy
	if len(r.Blocks) > 0 {
		limit := bestCost * (1 + d.Tie)
		pick, pickCached, pickCost := best, v.cached(best, r), bestCost
		for i, in := range v.members {
			if !v.ready[i] || int32(i) == best {
				continue
			}
			c := decodeCost(in)
			if c > limit {
				continue
			}
			if cached := v.cached(int32(i), r); cached > pickCached || (cached == pickCached && c < pickCost) {
				pick, pickCached, pickCost = int32(i), cached, c
			}
		}
		if pick != best {
			best, reason = pick, ReasonCache
		}
	}
	return choice{inst: best, fallback: -1, reason: reason}, nil
}

var _ policy = (*decodeCapacity)(nil)
