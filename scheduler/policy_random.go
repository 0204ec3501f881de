package scheduler

import (
	"sync/atomic"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Random: a uniformly random ready instance, from a seeded counter-based
// generator (deterministic for a given seed and call sequence).
type random struct {
	Seed uint64 `param:"seed"` // default 1; any whole number >= 0
	ctr  atomic.Uint64
}

func init() { register("random", func() configurable { return &random{Seed: 1} }) }

// Validate accepts every seed: decodeParams already refused what is not a
// whole number >= 0.
func (*random) Validate() error { return nil }

func (rd *random) pick(v *view, r *Request, cands []int32) (choice, error) {
	if v.nready == 0 {
		return choice{}, ErrNoEndpoint
	}
	x := hashing.Seeded(rd.Seed, rd.ctr.Add(1))
	return choice{inst: nthReady(v, int(x%uint64(v.nready))), fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*random)(nil)
