package scheduler

import "sync/atomic"

// Round robin over the ready instances, ignoring cache and load: a sanity
// floor for comparisons. No parameters.
type roundRobin struct {
	next atomic.Uint64
}

func init() { register("round-robin", func() configurable { return &roundRobin{} }) }

func (*roundRobin) Validate() error { return nil }

func (rr *roundRobin) pick(v *view, r *Request, cands []int32) (choice, error) {
	if v.nready == 0 {
		return choice{}, ErrNoEndpoint
	}
	return choice{inst: nthReady(v, int(rr.next.Add(1)-1)%v.nready), fallback: -1, reason: ReasonPolicy}, nil
}

// nthReady returns the member index of the k-th ready member (0-based).
func nthReady(v *view, k int) int32 {
	for i, ok := range v.ready {
		if ok {
			if k == 0 {
				return int32(i)
			}
			k--
		}
	}
	return -1
}

var _ policy = (*roundRobin)(nil)
