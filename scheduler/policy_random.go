package scheduler

import (
	"sync/atomic"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Random: a uniformly random ready instance, from a seeded counter-based
// generator (deterministic for a given seed and call sequence). Parameter
// seed (default 1).
type random struct {
	seed uint64
	ctr  atomic.Uint64
}

func init() { register("random", newRandom) }

func newRandom(p Params) (policy, error) {
	if err := p.check("seed"); err != nil {
		return nil, err
	}
	s, err := p.float("seed", 1, 0, 1<<53)
	if err != nil {
		return nil, err
	}
	return &random{seed: uint64(s)}, nil
}

func (rd *random) pick(v *view, r *Request, cands []int32) (choice, error) {
	if v.nready == 0 {
		return choice{}, ErrNoEndpoint
	}
	x := hashing.Seeded(rd.seed, rd.ctr.Add(1))
	return choice{inst: nthReady(v, int(x%uint64(v.nready))), fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*random)(nil)
