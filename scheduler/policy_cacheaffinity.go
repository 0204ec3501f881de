package scheduler

// Cache Affinity: plain consistent hashing of the key on ring 1, no load
// check (paper §4). Every request of a prefix goes to one instance while it
// is ready. No parameters.
type cacheAffinity struct{}

func init() { register("cache-affinity", func() configurable { return &cacheAffinity{} }) }

func (*cacheAffinity) Validate() error { return nil }

func (*cacheAffinity) pick(v *view, r *Request, cands []int32) (choice, error) {
	if len(cands) == 0 {
		return choice{}, ErrNoEndpoint
	}
	return choice{inst: cands[0], fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*cacheAffinity)(nil)
