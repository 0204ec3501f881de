package scheduler

// Least Loaded: the ready instance with the fewest pending prefill tokens
// (router-queued plus dispatched and not yet through prefill); ties go to
// fewer running requests, then to the lower member index. Ignores the cache.
// No parameters.
type leastLoaded struct{}

func init() { register("least-loaded", func() configurable { return &leastLoaded{} }) }

func (*leastLoaded) Validate() error { return nil }

func (*leastLoaded) pick(v *view, r *Request, cands []int32) (choice, error) {
	best := int32(-1)
	for i, in := range v.members {
		if !v.ready[i] {
			continue
		}
		if best < 0 {
			best = int32(i)
			continue
		}
		b := v.members[best]
		if a, ab := in.ahead(), b.ahead(); a < ab || (a == ab && in.running.get() < b.running.get()) {
			best = int32(i)
		}
	}
	if best < 0 {
		return choice{}, ErrNoEndpoint
	}
	return choice{inst: best, fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*leastLoaded)(nil)
