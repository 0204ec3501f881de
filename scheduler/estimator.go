package scheduler

import (
	"fmt"
	"math"
	"sync/atomic"
)

// The TTFT estimator. It models an engine that runs in steps (vLLM, SGLang
// with chunked prefill): each step computes up to StepTokens prompt tokens
// and one token of every running sequence. The estimated time to first
// token of a request r on instance i is
//
//	W       = A_i + U(r, i) + P x (N_i + 1)
//	base    = c_i x W + k_i x (W / StepTokens + 1) x (StepBase + DecodePerSeq x R_i) + q x U(r, i)^2
//	TTFT    = base x (1 + MemoryWeight x max(0, m_i - MemoryKnee) / (1 - MemoryKnee))
//	          + S_i x max(0, O_i - MaxSeqs + 1) / MaxSeqs
//
// where A_i is the prefill work already ahead of r on i (uncached tokens
// queued in the router for i plus uncached tokens dispatched to i and not yet
// through prefill), U(r, i) the part of r's prompt that i does not hold, N_i
// the requests ahead of r in prefill and P the fixed cost of one request in
// prefill-token equivalents (a fully cached request is not free: it still
// takes a slot of a step, its last block, its sampling), R_i the sequences
// running on i (the decode batch every step of r's prefill carries), m_i the
// fraction of i's KV memory in use, c_i the per-token prefill cost and k_i a
// learned scale of the step overhead. The first term is the prefill queue,
// the second the decode slowdown, the factor the memory pressure: a nearly
// full KV cache stops admitting new requests until running ones finish. The
// last term is the wait for a sequence slot: O_i requests are dispatched to
// i and not finished, the engine runs at most MaxSeqs at a time, and one
// frees every S_i / MaxSeqs seconds, S_i being the learned mean time a
// request holds a slot (an average of observed requests: from the first
// token to completion, plus the request's own prefill as the estimate
// costs it on an idle instance, or its TTFT if that was shorter). While the
// engine's own reports show it full, MaxSeqs is the limit learned from them
// instead (slots.go).
//
// c_i and k_i are one pair for the whole pool unless CostConfig.PerInstance:
// an instance that a high estimate keeps idle would otherwise never be
// observed, and never corrected. c starts from the profile
// (CostConfig.PerToken), k from 1, and both are refined online: each observed
// TTFT t, measured from dispatch, is compared with the estimate p made at
// dispatch (memory factor and q term taken out, the slot wait left in);
// the log-ratio, clipped to ±MaxStep, moves each coefficient by LearnRate
// times its term's share of p (the slot wait's share moves neither),
// so the prefill cost learns from long prompts on quiet instances and the
// step overhead from cached requests on busy ones. An outlier (a GC pause)
// moves them by at most LearnRate*MaxStep while a lasting change is tracked
// in a few dozen samples.

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
	// RequestTokens is P, the cost of one request in prefill-token
	// equivalents however much of it is cached (default 32; negative: 0).
	RequestTokens int
	// StepTokens is the prompt tokens one engine step computes (vLLM's
	// max_num_batched_tokens; default 8192).
	StepTokens int
	// StepBase is the time of one engine step with a tiny batch, in
	// seconds (default 0.02; negative: 0).
	StepBase float64
	// DecodePerSeq is what one running sequence adds to every step, in
	// seconds (default 0.0008; negative: 0).
	DecodePerSeq float64
	// MemoryKnee is the KV memory use (fraction) from which the estimate
	// grows (default 0.85), MemoryWeight how much it has grown at full
	// memory (default 2: three times the estimate; negative: off).
	MemoryKnee, MemoryWeight float64
	// MaxSeqs is the sequences an engine runs at once (vLLM's max_num_seqs;
	// default Queue.MaxRunning when set, else 256); requests beyond it wait
	// for a slot.
	MaxSeqs int
	// ServiceTime is the prior of S, the mean seconds a request holds a
	// sequence slot (its own prefill, then its decode to completion),
	// until completions are observed (default 20: a few hundred output
	// tokens at ~0.05 s a step).
	ServiceTime float64
	// KVTokens is an instance's KV memory in tokens (e.g. HBM bytes /
	// KV bytes per token), for the router's own memory estimate from the
	// prompts it has in flight there (default 0: only the engine's report,
	// EngineLoad.KVUsage, is used).
	KVTokens int
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
	if c.RequestTokens == 0 {
		c.RequestTokens = 32
	}
	if c.StepTokens == 0 {
		c.StepTokens = 8192
	}
	if c.StepBase == 0 {
		c.StepBase = 0.02
	}
	if c.DecodePerSeq == 0 {
		c.DecodePerSeq = 0.0008
	}
	if c.MaxSeqs == 0 {
		c.MaxSeqs = 256
	}
	if c.ServiceTime == 0 {
		c.ServiceTime = 20
	}
	if c.MemoryKnee == 0 {
		c.MemoryKnee = 0.85
	}
	if c.MemoryWeight == 0 {
		c.MemoryWeight = 2
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
	case c.StepTokens < 1:
		return fmt.Errorf("cost.step_tokens must be >= 1, got %d", c.StepTokens)
	case math.IsNaN(c.StepBase) || math.IsInf(c.StepBase, 0) || c.StepBase > 10:
		return fmt.Errorf("cost.step_base must be a number of seconds <= 10, got %g", c.StepBase)
	case math.IsNaN(c.DecodePerSeq) || math.IsInf(c.DecodePerSeq, 0) || c.DecodePerSeq > 1:
		return fmt.Errorf("cost.decode_per_seq must be a number of seconds <= 1, got %g", c.DecodePerSeq)
	case !(c.MemoryKnee > 0 && c.MemoryKnee < 1):
		return fmt.Errorf("cost.memory_knee must be in (0, 1), got %g", c.MemoryKnee)
	case math.IsNaN(c.MemoryWeight) || math.IsInf(c.MemoryWeight, 0) || c.MemoryWeight > 100:
		return fmt.Errorf("cost.memory_weight must be a number <= 100, got %g", c.MemoryWeight)
	case !(c.ServiceTime > 0) || math.IsInf(c.ServiceTime, 0):
		return fmt.Errorf("cost.service_time must be a positive number of seconds, got %g", c.ServiceTime)
	case c.MaxSeqs < 1:
		return fmt.Errorf("cost.max_seqs must be >= 1, got %d", c.MaxSeqs)
	case c.KVTokens < 0:
		return fmt.Errorf("cost.kv_tokens must be >= 0, got %d", c.KVTokens)
	}
	return nil
}

// estimator is one instance's (or the pool's) learned coefficients. Safe
// for concurrent use: policies read them while observations refine them.
type estimator struct {
	cfg   *CostConfig
	costv atomicFloat  // c: seconds per prefill token
	stepv atomicFloat  // k: scale of the step overhead
	svc   atomicFloat  // S: mean seconds from dispatch to completion
	svcN  atomic.Int64 // completions observeService has counted
	ahead aheadFit     // the marginal cost of prefill work ahead (admission.go)
	busy  busyFit      // a token's own cost by the slots in use (busyfit.go)
	// The configuration's fixed terms, negatives as 0.
	reqTokens       float64
	stepBase, perSq float64
	memW            float64
}

func newEstimator(cfg *CostConfig, cost, step float64) *estimator {
	e := &estimator{cfg: cfg,
		reqTokens: float64(max(cfg.RequestTokens, 0)),
		stepBase:  max(cfg.StepBase, 0), perSq: max(cfg.DecodePerSeq, 0),
		memW: max(cfg.MemoryWeight, 0)}
	e.costv.set(cost)
	e.stepv.set(step)
	e.svc.set(cfg.ServiceTime)
	return e
}

// cost is the current per-token cost in seconds.
func (e *estimator) cost() float64 { return e.costv.get() }

// stepScale is the current scale of the step overhead.
func (e *estimator) stepScale() float64 { return e.stepv.get() }

// TTFTTerms is an instance's estimated TTFT for a request, by term (see the
// estimator's model in estimator.go). All in seconds; Total is their sum.
type TTFTTerms struct {
	Prefill float64 // c x W (+ the q term): the prefill work ahead and its own
	Decode  float64 // the step overhead: steps x (base + running x per-sequence)
	Memory  float64 // what KV memory pressure and the wait for a sequence slot add
	Total   float64
}

// load is what the estimate reads of an instance at one moment.
type load struct {
	ahead    int     // prefill tokens ahead
	requests int     // requests ahead in prefill
	running  int     // sequences running (decode batch)
	occupied int     // requests dispatched and not finished (running or waiting in the engine)
	slots    int     // the sequences the engine runs at once (0: CostConfig.MaxSeqs)
	memory   float64 // KV memory in use, fraction
}

// work is W, the prefill-token equivalents a request with uncached tokens
// of its own waits for, and its step overhead before scaling by k.
func (e *estimator) work(l load, uncached int) (w, steps float64) {
	w = float64(l.ahead+uncached) + e.reqTokens*float64(l.requests+1)
	steps = (w/float64(e.cfg.StepTokens) + 1) * (e.stepBase + e.perSq*float64(l.running))
	return w, steps
}

// memFactor is the memory pressure's factor minus one.
func (e *estimator) memFactor(m float64) float64 {
	k := e.cfg.MemoryKnee
	if !(m > k) {
		return 0
	}
	return e.memW * (min(m, 1) - k) / (1 - k)
}

// terms returns the estimated TTFT of a request with uncached tokens of its
// own on an instance under l.
func (e *estimator) terms(l load, uncached int) TTFTTerms {
	w, steps := e.work(l, uncached)
	u := float64(uncached)
	t := TTFTTerms{Prefill: e.cost()*w + e.cfg.Quadratic*u*u, Decode: e.stepScale() * steps}
	t.Memory = (t.Prefill+t.Decode)*e.memFactor(l.memory) + e.slotWait(l)
	t.Total = t.Prefill + t.Decode + t.Memory
	return t
}

// ttft is terms(l, uncached).Total, in seconds.
func (e *estimator) ttft(l load, uncached int) float64 {
	w, steps := e.work(l, uncached)
	u := float64(uncached)
	base := e.cost()*w + e.cfg.Quadratic*u*u + e.stepScale()*steps
	return base*(1+e.memFactor(l.memory)) + e.slotWait(l)
}

// slotWait is the expected wait for a sequence slot.
func (e *estimator) slotWait(l load) float64 {
	n := e.limit(l)
	over := l.occupied - n + 1
	if over <= 0 {
		return 0
	}
	return e.svc.get() * float64(over) / float64(n)
}

// limit is the sequences the engine runs at once under l: l.slots, or
// CostConfig.MaxSeqs when l knows none.
func (e *estimator) limit(l load) int {
	if l.slots > 0 {
		return l.slots
	}
	return e.cfg.MaxSeqs
}

// startRunning is the requests in flight on an instance once a request
// sent under l starts, itself included; -1 when its engine runs as many
// as it can and it would wait for a slot (slotWait > 0).
func (e *estimator) startRunning(l load) float64 {
	if l.occupied >= e.limit(l) {
		return -1
	}
	return float64(l.occupied + 1)
}

// serviceTime is the learned mean time a request holds a sequence slot.
func (e *estimator) serviceTime() float64 { return e.svc.get() }

// observeService refines S from the time one request held its sequence
// slot. Not the time from dispatch: that includes the wait for the slot,
// and an engine queue that grew would make every slot look slower to free
// and the queue longer.
//
// The prior counts as one completion: S is the mean of it and the
// completions seen until they number svcWindow, then an exponential
// average over about the last svcWindow. The prior (CostConfig.ServiceTime,
// 20 s) is a guess for long generations: an exponential average from it
// kept most of it for about a hundred completions, and on an engine whose
// requests hold a slot a second (llm-d's simulator with 64 output tokens)
// the slot wait of every estimate in that time was several times what the
// engine showed; with several router replicas each one sees only its
// share of the completions, so that took proportionally longer on each.
// One completion does not replace it: a short first request (a warm-up
// of a few tokens) would make every slot look free.
func (e *estimator) observeService(d float64) {
	if !(d > 0) || math.IsInf(d, 0) {
		return
	}
	w := max(1/float64(e.svcN.Add(1)+1), 1.0/svcWindow)
	for {
		old := e.svc.bits.Load()
		v := math.Float64frombits(old)
		v += w * (d - v)
		if e.svc.bits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// svcWindow is the number of completions S averages over (observeService).
const svcWindow = 50

// sample is what a dispatch records to learn from its TTFT: the estimate's
// parts at dispatch.
type sample struct {
	work, steps float64 // W and the unscaled step overhead
	uncached    int
	mem         float64 // the memory factor minus one
	slot        float64 // the estimated wait for a sequence slot, seconds
}

func (e *estimator) sampleOf(l load, uncached int) sample {
	w, steps := e.work(l, uncached)
	return sample{work: w, steps: steps, uncached: uncached, mem: e.memFactor(l.memory), slot: e.slotWait(l)}
}

// observe refines c and k from one measured TTFT (seconds from dispatch)
// of a request dispatched with sample s. The slot wait the estimate
// counted at dispatch is compared with the measurement too, but only c and
// k learn from the ratio, by their shares of the whole: a slot wait that
// did happen is not prefill cost, and one the estimate missed raises c and
// k as before.
func (e *estimator) observe(s sample, ttft float64) {
	if e.cfg.LearnRate < 0 || s.work <= 0 || !(ttft > 0) {
		return
	}
	u := float64(s.uncached)
	t := ttft/(1+s.mem) - e.cfg.Quadratic*u*u
	if !(t > 0) || math.IsInf(t, 0) {
		return
	}
	for {
		oc, ok := e.costv.bits.Load(), e.stepv.bits.Load()
		c, k := math.Float64frombits(oc), math.Float64frombits(ok)
		pc, pk := c*s.work, k*s.steps
		p := pc + pk + s.slot/(1+s.mem)
		if !(p > 0) {
			return
		}
		step := math.Log(t / p)
		step = math.Max(-e.cfg.MaxStep, math.Min(e.cfg.MaxStep, step))
		c *= math.Exp(e.cfg.LearnRate * step * pc / p)
		k = math.Max(minStepScale, math.Min(maxStepScale, k*math.Exp(e.cfg.LearnRate*step*pk/p)))
		if e.costv.bits.CompareAndSwap(oc, math.Float64bits(c)) {
			e.stepv.set(k) // k has one writer at a time in practice; a lost update is one sample
			return
		}
	}
}

// unlearnWaits puts c and k back to their priors where they are above:
// what they learned before the slot wait was counted (slots.go).
func (e *estimator) unlearnWaits() {
	e.costv.set(min(e.costv.get(), e.cfg.PerToken))
	e.stepv.set(min(e.stepv.get(), 1))
}

// The step scale stays within these bounds: a prior off by more than 20x
// is a configuration error, and a scale driven to 0 would never recover.
const (
	minStepScale = 0.05
	maxStepScale = 20
)
