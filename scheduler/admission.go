package scheduler

import (
	"fmt"
	"math"
	"os"
	"sync"
)

// The adaptive admission rule of the router queue (QueueConfig.Adaptive;
// our decision, not the paper's). A fixed budget of pending prefill tokens
// fits one engine: on an engine that prefills one step's tokens at a time
// (vLLM with chunked prefill and a shared step budget) every pending token
// delays every request behind it, while an engine that works on many
// prompts in parallel is far from full at the same count, and holding
// requests in the router only makes them wait. So the rule asks the engine
// and what the router has measured, and until there is evidence of
// saturation it dispatches at once.
//
// A request routed to instance i waits in the router when
//
//   - the engine is full: its last report showed requests waiting
//     (vllm:num_requests_waiting > 0) at its limit on running requests
//     (the most it was seen running with a queue: max_num_seqs), and this
//     replica has seen no more of its requests complete there since than
//     were waiting plus those it dispatched there since: the engine could
//     not start it now; or
//   - work is pending on i (uncached prompt tokens dispatched and not yet
//     through prefill, all replicas') and a x (pending + its own uncached
//     tokens) > SLOShare x SLO, where a is the marginal TTFT of one token of
//     work ahead, learned online: the slope of observed TTFT (from
//     dispatch) against the pending prefill each request was dispatched
//     behind, an exponentially weighted least-squares fit over about the
//     last 256 first tokens. On an engine that prefills in parallel the
//     slope is near 0 and nothing waits until the engine queues; on a
//     step-bound engine it is about the per-token prefill cost, and the
//     rule is a token budget of SLOShare x SLO / a, calibrated online.
//
// A request is always dispatched to an instance with nothing of the
// router's in flight, so a stale engine report cannot hold a queue forever.
// Late requests under LateIdle go to an instance that is not queuing and
// whose work ahead costs less than an eighth of that share, with fewer than
// IdleRunning requests in flight.

// aheadFit is the exponentially weighted least-squares fit of observed TTFT
// on the work ahead at dispatch. observe is called concurrently (from every
// instance sharing the estimator); slope is read without a lock.
type aheadFit struct {
	mu                  sync.Mutex // guards the sums
	n, sx, sy, sxx, sxy float64
	slopev              atomicFloat // the last identified slope, seconds per token
	identified          bool        // guarded by mu
}

const (
	// aheadDecay is the weight an observation loses per later one.
	aheadDecay = 1.0 / 256
	// aheadMinSamples is the weighted count below which the fit says
	// nothing (a slope of 0: dispatch at once).
	aheadMinSamples = 32
	// aheadMinSpread is the spread of the work ahead, in tokens (standard
	// deviation), below which the slope is not identified and its last
	// value stays.
	aheadMinSpread = 64
)

// observe adds one first token: ttft seconds after a dispatch behind
// ahead tokens of pending prefill.
func (f *aheadFit) observe(ahead, ttft float64) {
	if !(ttft > 0) || math.IsInf(ttft, 0) || ahead < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := 1 - aheadDecay
	f.n = f.n*d + 1
	f.sx = f.sx*d + ahead
	f.sy = f.sy*d + ttft
	f.sxx = f.sxx*d + ahead*ahead
	f.sxy = f.sxy*d + ahead*ttft
	if f.n < aheadMinSamples {
		return
	}
	mx, my := f.sx/f.n, f.sy/f.n
	vx := f.sxx/f.n - mx*mx
	if vx < aheadMinSpread*aheadMinSpread {
		return
	}
	f.slopev.set(max((f.sxy/f.n-mx*my)/vx, 0))
	dbgN++
	if dbgN%500 == 0 && os.Getenv("ADM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "slope %.3g mx %.0f sdx %.0f my %.3f\n", f.slope(), mx, math.Sqrt(vx), my)
	}
}

var dbgN int
var dbgIdle = os.Getenv("ADM_IDLE") != ""
var dbgNoQ = os.Getenv("ADM_NOQ") != ""

// slope is the learned marginal TTFT of a token of work ahead, in seconds
// (0 until identified).
func (f *aheadFit) slope() float64 { return f.slopev.get() }

// engineQueuing reports whether in's engine is, as far as this replica
// can tell, full: its last report showed requests waiting with as many
// running as the most it was ever seen running with a queue (engineSlots,
// its limit on running requests; a queue below it waits for memory, not
// for a slot, and the estimate's memory term covers that), and this
// replica has not seen more of its requests complete there since than
// the waiting ones and those it dispatched since: a request sent now would
// wait in the engine's queue, where it can no longer be reordered or
// moved. Between reports of no queue nothing is assumed: an engine at its
// limit without a queue may be one whose limit is higher than seen.
func (in *instance) engineQueuing() bool {
	w := in.engineWaiting.get()
	return w > 0 && in.engineRunning.get() >= in.engineSlots.get() &&
		w+in.sinceReport.dispatched.get()-in.sinceReport.completed.get() >= 0
}

// aheadBudget is the time, in seconds, the work ahead on an instance may
// take at the learned slope before requests wait in the router.
func (s *Scheduler) aheadBudget() float64 {
	return s.cfg.Queue.SLOShare * s.cfg.SLO.Seconds()
}

// admitAdaptive is admissible under QueueConfig.Adaptive.
func (s *Scheduler) admitAdaptive(in *instance, r *Request) bool {
	flight := in.inFlight()
	if m := s.cfg.Queue.MaxRunning; m > 0 && flight >= m {
		return false
	}
	if flight == 0 {
		return true
	}
	if !dbgNoQ && in.engineQueuing() {
		return false
	}
	p := in.pendingTokens.get() + in.remote.PendingTokens.get()
	return p == 0 || in.est.ahead.slope()*float64(p+r.uncached) <= s.aheadBudget()
}

// idleAdaptive is idle under QueueConfig.Adaptive.
func (s *Scheduler) idleAdaptive(in *instance) bool {
	if dbgIdle {
		return in.pendingTokens.get() == 0 && in.inFlight() < s.cfg.Queue.IdleRunning
	}
	if in.inFlight() >= s.cfg.Queue.IdleRunning || in.engineQueuing() {
		return false
	}
	p := in.pendingTokens.get() + in.remote.PendingTokens.get()
	return p == 0 || in.est.ahead.slope()*float64(p) <= s.aheadBudget()/8
}
