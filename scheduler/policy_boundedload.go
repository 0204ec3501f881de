package scheduler

import "math"

// Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
// SODA 2018), as in the SGLang gateway's prefix_hash: walk ring 1 clockwise
// from the key and take the first ready instance whose request count
// (running plus router-queued, all replicas) stays within bound x the average after adding
// this one.
type boundedLoad struct {
	Bound float64 `param:"bound"` // default 1.25, in [1, 100]
}

func init() {
	register("consistent-hash-bounded-load", func() configurable { return &boundedLoad{Bound: 1.25} })
}

func (b *boundedLoad) Validate() error { return inRange("bound", b.Bound, 1, 100) }

func (b *boundedLoad) pick(v *view, r *Request, cands []int32) (choice, error) {
	if v.nready == 0 || len(cands) == 0 {
		return choice{}, ErrNoEndpoint
	}
	total := 1
	for i, in := range v.members {
		if v.ready[i] {
			total += in.requests()
		}
	}
	limit := int(math.Ceil(b.Bound * float64(total) / float64(v.nready)))
	ring := &v.rings.rings[0]
	n := len(ring.points)
	key := r.key
	i := ring.first(key)
	for step := 0; step < n; step++ {
		m := ring.points[i].member
		if in := v.members[m]; v.ready[m] && in.requests()+1 <= limit {
			reason := ReasonCache
			if m != cands[0] {
				reason = ReasonLoad
			}
			return choice{inst: m, fallback: -1, reason: reason}, nil
		}
		i++
		if i == n {
			i = 0
		}
	}
	return choice{inst: cands[0], fallback: -1, reason: ReasonPolicy}, nil // unreachable: the average is within the bound
}

var _ policy = (*boundedLoad)(nil)
