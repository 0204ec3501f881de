package scheduler

// Min TTFT (Mooncake-style): over every ready instance, the lowest
// estimated TTFT, using each instance's cached prefix for this request and
// its queued work. Strong with perfect, fresh information; it herds onto one
// instance when its view is stale. No parameters.
type minTTFT struct{}

func init() { register("min-ttft", func() configurable { return &minTTFT{} }) }

func (*minTTFT) Validate() error { return nil }

func (*minTTFT) pick(v *view, r *Request, cands []int32) (choice, error) {
	best, _ := v.minTTFT(r)
	if best < 0 {
		return choice{}, ErrNoEndpoint
	}
	return choice{inst: best, fallback: -1, reason: ReasonPolicy}, nil
}

var _ policy = (*minTTFT)(nil)
