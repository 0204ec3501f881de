package scheduler

import (
	"math"
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
//     work ahead, learned online with c, that of one token of the
//     request's own: observed TTFT (from dispatch) against the pending
//     prefill each request was dispatched behind and its own uncached
//     tokens, an exponentially weighted least-squares fit over about the
//     last 256 first tokens. a counts only when it is at least c/2: on a
//     step-bound engine (vLLM with chunked prefill) a token ahead costs
//     about what one's own does, and the rule is a token budget of
//     SLOShare x SLO / a, calibrated online; on an engine that prefills in
//     parallel a is far below c, and nothing waits until the engine is
//     full.
//
// A request is always dispatched to an instance with nothing of the
// router's in flight, so a stale engine report cannot hold a queue forever.
// Late requests under LateIdle go to an instance that is not queuing and
// whose work ahead costs less than an eighth of that share, with fewer than
// IdleRunning requests in flight.

// aheadFit is the exponentially weighted least-squares fit of observed TTFT
// on the work ahead at dispatch and the request's own uncached tokens:
//
//	TTFT = b + a x ahead + c x own
//
// a is what a token of someone else's prefill costs a request, c what a
// token of its own does. On a step-bound engine the two are alike (every
// token goes through the same step budget); on one that prefills requests
// in parallel a is far below c. observe is called concurrently (from every
// instance sharing the estimator); slope and own are read without a lock.
//
// The work ahead is this replica's pending prefill plus the others' as they
// last reported it, which with several replicas is seconds old: an error in
// the regressor that flattens a (four routers of the simulator exchanging
// every 2 s fitted a at 0.42 of c on a step-bound engine, against 0.73 with
// one). So whether the engine prefills in parallel (parallel) is read from
// a second fit that splits the work ahead into this replica's, known
// exactly, and the others':
//
//	TTFT = b + a1 x local + a2 x remote + c x own
//
// and compares a1 with c; with one replica (no spread in remote) the two
// fits are the same.
type aheadFit struct {
	mu            sync.Mutex  // guards sums
	sums          ewls3       // of TTFT on local, remote and own tokens
	slopev, ownv  atomicFloat // the last identified a and c, seconds per token
	localv, lownv atomicFloat // the last identified a1 and its c (a and c without a split)
}

const (
	// aheadDecay is the weight an observation loses per later one.
	aheadDecay = 1.0 / 256
	// aheadMinSamples is the weighted count below which the fit says
	// nothing (a slope of 0: dispatch at once).
	aheadMinSamples = 32
	// aheadMinSpread is the spread of the work ahead and of the own
	// tokens, in tokens (standard deviation), below which the fit is not
	// identified and its last values stay.
	aheadMinSpread = 64
)

// observe adds one first token: ttft seconds after a dispatch behind local
// tokens of this replica's pending prefill and remote of the others', with
// own uncached tokens.
func (f *aheadFit) observe(local, remote, own, ttft float64) {
	if !(ttft > 0) || math.IsInf(ttft, 0) || local < 0 || remote < 0 || own < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sums.add([3]float64{local, remote, own}, ttft)
	if f.sums.n < aheadMinSamples {
		return
	}
	// Covariances of local (0), remote (1), own (2) and y. With remote
	// always 0 (one replica) every term below is what the fit on the whole
	// work ahead computed before the split, to the bit.
	c, cy := f.sums.cov()
	// The work ahead, local + remote.
	c11 := c[0][0] + 2*c[0][1] + c[1][1]
	c22, c12 := c[2][2], c[0][2]+c[1][2]
	c1y, c2y := cy[0]+cy[1], cy[2]
	const spread2 = aheadMinSpread * aheadMinSpread
	if c11 < spread2 {
		return
	}
	det := c11*c22 - c12*c12
	if c22 < spread2 || det < 0.01*c11*c22 {
		// Own tokens do not vary apart from the work ahead: the slope alone.
		f.slopev.set(max(c1y/c11, 0))
		f.localv.set(f.slopev.get())
		return
	}
	a, own := max((c22*c1y-c12*c2y)/det, 0), max((c11*c2y-c12*c1y)/det, 0)
	f.slopev.set(a)
	f.ownv.set(own)
	if a1, c1, ok := splitFit(c, cy); ok {
		a, own = a1, c1
	}
	f.localv.set(a)
	f.lownv.set(own)
}

// splitFit solves the three-regressor fit from the covariances c of local,
// remote and own tokens and cy of each with TTFT, for a1 and c; ok is
// false when it is not identified (no spread in one of them, or one a
// combination of the others).
func splitFit(c [3][3]float64, cy [3]float64) (a1, own float64, ok bool) {
	b, ok := solve3(c, cy)
	return max(b[0], 0), max(b[2], 0), ok
}

// slope is the learned marginal TTFT of a token of work ahead, in seconds
// (0 until identified).
func (f *aheadFit) slope() float64 { return f.slopev.get() }

// cost is the learned cost of a token of work ahead that the rule holds
// requests for: a, where a token ahead costs at least half of what one of
// the request's own does (a step-bound engine, where pending prefill delays
// everyone); 0 on an engine whose work ahead costs a request far less than
// its own prompt (it prefills in parallel: holding requests back would not
// help the others).
func (f *aheadFit) cost() float64 {
	a := f.slopev.get()
	if a < f.ownv.get()/2 {
		return 0
	}
	return a
}

// parallel reports whether the fit has identified an engine that prefills
// requests in parallel: a token of its own costs a request something, and
// a token of this replica's work ahead less than half of that (with one
// replica: cost is 0).
func (f *aheadFit) parallel() bool {
	own := f.lownv.get()
	return own > 0 && f.localv.get() < own/2
}

// own is the learned marginal TTFT of a token of the request's own (0
// until identified).
func (f *aheadFit) own() float64 { return f.ownv.get() }

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
	return in.engineWaiting.get() > 0 && in.engineRunning.get() >= in.engineSlots.get() && in.queueLeft()
}

// queueLeft reports whether the engine's last reported queue may still be
// there: no more requests have completed there since the report than the
// waiting ones and those dispatched since. A replica sees only its own
// dispatches and completions; with SetReplicas(n) it counts each as n, the
// share of the pool's it stands for (else n replicas would wait for n times
// the completions, and hold requests on an engine that has drained until
// its next report).
func (in *instance) queueLeft() bool {
	net := in.sinceReport.dispatched.get() - in.sinceReport.completed.get()
	if in.replicas != nil {
		if n := int(in.replicas.Load()); n > 1 {
			net *= n
		}
	}
	return in.engineWaiting.get()+net >= 0
}

// aheadBudget is the time, in seconds, the work ahead on an instance may
// take at the learned slope before requests wait in the router.
func (s *Scheduler) aheadBudget() float64 {
	return s.cfg.Queue.SLOShare * s.cfg.SLO.Seconds()
}

// admitAdaptive is admissible under QueueConfig.Adaptive.
func (s *Scheduler) admitAdaptive(in *instance, r *Request) bool {
	flight := in.inFlight()
	if m := s.cfg.Queue.MaxRunning; m > 0 && in.running.get()+s.othersShare(in.remote.Running.get(), float64(m)) >= m {
		return false
	}
	if flight == 0 {
		return true
	}
	if in.engineQueuing() {
		return false
	}
	a := in.est.ahead.cost()
	p := in.pendingTokens.get() + s.othersShare(in.remote.PendingTokens.get(), s.aheadBudget()/a) // the others' share of the budget in tokens
	return p == 0 || a*float64(p+r.uncached) <= s.aheadBudget()
}

// idleAdaptive is idle under QueueConfig.Adaptive.
func (s *Scheduler) idleAdaptive(in *instance) bool {
	if s.lateServed(in) {
		return !in.engineQueuing()
	}
	if in.inFlight() >= s.cfg.Queue.IdleRunning || in.engineQueuing() {
		return false
	}
	p := in.prefillPending()
	return p == 0 || in.est.ahead.cost()*float64(p) <= s.aheadBudget()/8
}

// lateServed reports whether late requests held for in are served as under
// LateServe whatever QueueConfig.Late says: under QueueConfig.Adaptive, on
// an engine the admission fit has found to prefill requests side by side
// (aheadFit.parallel, llm-d's simulator). Every instance that is not known
// to queue counts as idle, so a late request is dispatched as soon as no
// request that can still make its SLO waits ahead of it, and its prefix
// stays in its instance's held blocks (top, queue.go): it is coming soon.
// Waiting for an instance with fewer than IdleRunning in flight protects
// the on-time requests of a step-bound engine, where a late prefill takes
// step budget from all of them. On a parallel engine it takes nothing from
// their prefill, and past saturation no instance went idle until the load
// fell: the late requests waited for the end of the burst, and their
// group-mates, finding the prefix nowhere, prefilled it again elsewhere.
// On llm-d's simulator at 150% of the shared-prefix workload's capacity
// that cost 1-3 points of hit rate, a p99 TTFT of 5.6-6.6 s against
// llm-d's 5.1-5.2 s and 2-3% of output (docs/evaluation.md, "Late requests
// on a parallel engine").
func (s *Scheduler) lateServed(in *instance) bool {
	return s.cfg.Queue.Adaptive && in.est.ahead.parallel()
}
