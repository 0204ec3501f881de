package scheduler

import (
	"fmt"
	"math"
)

// The TTFT estimator. The estimated time to first token of a request r on
// instance i is
//
//	TTFT(r, i) = c_i * (A_i + U(r, i)) + q * U(r, i)^2
//
// where A_i is the prefill work already ahead of r on i (uncached tokens
// queued in the router for i plus uncached tokens dispatched to i and not yet
// through prefill), U(r, i) is the part of r's prompt that i does not hold,
// c_i is i's per-token prefill cost and q an optional attention term. Decode
// interference and batching are not modelled: prefill dominates TTFT for the
// prompts this router exists for, and the learned c_i absorbs the average of
// the rest.
//
// c_i is one cost for the whole pool unless CostConfig.PerInstance: an
// instance that a high estimate keeps idle would otherwise never be
// observed, and never corrected. It starts from the profile
// (CostConfig.PerToken) and is refined online:
// each observed TTFT t, measured from dispatch, for work W = A_i + U at
// dispatch, gives a sample s = (t - q*U^2) / W. The cost moves towards it in
// log space by LearnRate, with the step clipped to ±MaxStep, so an outlier
// (a request stuck behind a long decode, a GC pause) moves the cost by at
// most LearnRate*MaxStep while a lasting change is tracked in a few dozen
// samples.

// CostConfig configures the TTFT estimator. Zero values mean defaults.
type CostConfig struct {
	// PerToken is the prior per-token prefill cost in seconds (default
	// 0.00016: Qwen2.5-7B on one Ascend 910B4, the DualMap paper's profile).
	PerToken float64
	// Quadratic is the attention term q in seconds per squared uncached
	// token (default 0: off).
	Quadratic float64
	// LearnRate is the weight of one observation in log space (default
	// 0.05); negative disables online learning.
	LearnRate float64
	// MaxStep clips one observation's log-ratio (default 0.5).
	MaxStep float64
	// PerInstance learns a cost per instance (for pools of mixed hardware)
	// instead of one for the pool (default). A per-instance cost starts from
	// the pool's current one; beware that an instance a bad estimate keeps
	// idle gets no observations to correct it.
	PerInstance bool
}

func (c CostConfig) withDefaults() CostConfig {
	if c.PerToken == 0 {
		c.PerToken = 0.00016
	}
	if c.LearnRate == 0 {
		c.LearnRate = 0.05
	}
	if c.MaxStep == 0 {
		c.MaxStep = 0.5
	}
	return c
}

func (c CostConfig) validate() error {
	switch {
	case c.PerToken <= 0 || math.IsNaN(c.PerToken) || math.IsInf(c.PerToken, 0):
		return fmt.Errorf("cost.per_token must be a positive number of seconds, got %g", c.PerToken)
	case c.Quadratic < 0:
		return fmt.Errorf("cost.quadratic must be >= 0, got %g", c.Quadratic)
	case c.LearnRate > 1:
		return fmt.Errorf("cost.learn_rate must be <= 1, got %g", c.LearnRate)
	case c.MaxStep <= 0:
		return fmt.Errorf("cost.max_step must be > 0, got %g", c.MaxStep)
	}
	return nil
}

// estimator is one instance's per-token cost. Safe for concurrent use:
// policies read the cost while observations refine it.
type estimator struct {
	cfg   *CostConfig
	costv atomicFloat // seconds per token
}

func newEstimator(cfg *CostConfig, cost float64) *estimator {
	e := &estimator{cfg: cfg}
	e.costv.set(cost)
	return e
}

// cost is the current per-token cost in seconds.
func (e *estimator) cost() float64 { return e.costv.get() }

// ttft returns the estimated TTFT in seconds for ahead tokens of work
// before a request with uncached tokens of its own.
func (e *estimator) ttft(ahead, uncached int) float64 {
	u := float64(uncached)
	return e.cost()*float64(ahead+uncached) + e.cfg.Quadratic*u*u
}

// observe refines the cost from one measured TTFT (seconds from dispatch)
// of a request that had work tokens to wait for, uncached of them its own.
func (e *estimator) observe(work, uncached int, ttft float64) {
	if e.cfg.LearnRate < 0 || work <= 0 || !(ttft > 0) {
		return
	}
	u := float64(uncached)
	s := (ttft - e.cfg.Quadratic*u*u) / float64(work)
	if !(s > 0) || math.IsInf(s, 0) {
		return
	}
	for {
		old := e.costv.bits.Load()
		c := math.Float64frombits(old)
		step := math.Log(s / c)
		step = math.Max(-e.cfg.MaxStep, math.Min(e.cfg.MaxStep, step))
		c *= math.Exp(e.cfg.LearnRate * step)
		if e.costv.bits.CompareAndSwap(old, math.Float64bits(c)) {
			return
		}
	}
}
