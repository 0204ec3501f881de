package scheduler

import (
	"sync/atomic"
	"time"
)

// The running limit the TTFT estimate's slot wait uses (estimator.go's
// S_i x max(0, O_i - MaxSeqs + 1) / MaxSeqs). CostConfig.MaxSeqs is a prior
// (256 unless configured); an engine that runs fewer at once, as llm-d's
// simulator at 16 and many vLLM deployments do, would look free of slot
// waits until that many requests were in flight there, and a cache-rich
// instance would keep getting requests that wait in its engine's queue.
//
// The engine's own reports (pools[].metrics, SetEngineLoad) show the limit
// when it is reached: requests wait while as many run as can. A queue seen
// once is no proof: every arrival waits in an engine's queue until its next
// step, so a report can catch one at any load. The limit is therefore
// learned only from a lasting queue, one that every report has shown for
// at least slotConfirm, and it is the most running seen in one. While the
// engine's reports show such a queue with that many running, and this
// replica has not seen it drain since (instance.queueLeft), the estimate
// counts the learned limit instead of the prior; otherwise the prior.
//
// Reports that teach the limit alone (SetEngineLimit, pools[].metrics
// with enabled false: the default) keep the engine's queue and running
// count out of estimates and admission, where they measured worse than the
// router's own count (docs/evaluation.md, "Polling on against off"). There
// a limit is taken only from a lasting queue at the most running any report
// has shown: an engine can queue below its limit for a while (a long
// prompt's prefill taking every step's token budget, a full KV cache), and
// a limit learned there would count slot waits that do not happen. A report
// of more running than the learned limit makes it unknown again until a
// lasting queue at the new most. While it is known, the estimate's slot
// wait compares it with the requests in flight as the routers count them.
// An instance that has taught none yet takes the most learned on any
// instance of the pool, unless it has shown more running than that: the
// instances of a pool are usually one engine configuration, and one that
// still looked free of slot waits while the others did not would draw the
// traffic until it too queued (on llm-d's simulator, with limits learned
// one instance at a time, shared-prefix at 150% had a TTFT p99 of 6.0-8.0 s
// against 4.8-5.4 s with the pool's limit; docs/evaluation.md).
//
// Until the first limit is learned, the estimate counted no slot wait, and
// the TTFTs it learned from carried the waits that did happen: the learned
// per-token cost and step scale absorbed them (13x the cost learned with
// the limit known, on llm-d's simulator at 150%). When the pool's first
// limit is learned they restart from the prior where they were above it.
//
// The admission rule's engineSlots (admission.go) learns from any queue,
// for a different purpose: there a false "full" holds a request in the
// router queue for one report, where it can still be reordered and moved.

// slotConfirm is how long an engine's queue must last, report after
// report, before its running count is taken as its limit: several engine
// steps (tens of milliseconds each), and two reports at the default
// metrics interval of 1 s.
const slotConfirm = 250 * time.Millisecond

// slotLimit is what an instance's reports taught about its running limit.
type slotLimit struct {
	queued bool          // the last report showed a queue; guarded by instance.mu
	since  time.Duration // when the reports started showing it; guarded by instance.mu
	// limit is the most running seen with a lasting queue (0: none yet);
	// lasting is 1 while the last report's queue has lasted slotConfirm;
	// only is 1 once a report came through SetEngineLimit.
	// seen is the most running any SetEngineLimit report showed.
	limit, lasting, only, seen counter
}

// lasted reports whether the queue of a report made at now, with waiting
// requests, has lasted slotConfirm, report after report. Called under
// instance.mu.
func (l *slotLimit) lasted(now time.Duration, waiting int) bool {
	if waiting == 0 {
		l.queued = false
		return false
	}
	if !l.queued {
		l.queued, l.since = true, now
	}
	return now-l.since >= slotConfirm
}

// report records one engine report made at now. Called under instance.mu.
func (l *slotLimit) report(now time.Duration, e EngineLoad) {
	if !l.lasted(now, e.Waiting) {
		l.lasting.set(0)
		return
	}
	l.lasting.set(1)
	if e.Running > l.limit.get() {
		l.limit.set(e.Running)
	}
}

// learn records one report made at now that teaches the limit alone.
// Called under instance.mu.
// pool is the scheduler's most learned limit, raised here; first reports
// whether this raised it from none.
func (l *slotLimit) learn(now time.Duration, e EngineLoad, pool *atomic.Int64) (first bool) {
	l.only.set(1)
	if e.Running > l.seen.get() {
		l.seen.set(e.Running)
		if e.Running > l.limit.get() {
			l.limit.set(0) // more ran than the limit: it was none
		}
	}
	if l.lasted(now, e.Waiting) && e.Running >= l.seen.get() {
		l.limit.set(e.Running)
		for {
			p := pool.Load()
			if int64(e.Running) <= p {
				return false
			}
			if pool.CompareAndSwap(p, int64(e.Running)) {
				return p == 0
			}
		}
	}
	return false
}

// confirmIn is, after a report that teaches the limit alone, how soon a
// report can teach it: the time left until the queue this report showed
// has lasted slotConfirm, when the instance knows no limit yet (none
// learned, and the pool's does not hold for it); 0 when no report is
// pending. A poller that comes back then rather than a whole interval later
// learns the limit within slotConfirm of first seeing the queue: on a
// fresh pool of engines that run few sequences (llm-d's simulator, 16, at
// a 1 s interval), requests were otherwise routed for seconds as if no slot
// could fill. Called under instance.mu.
func (in *instance) confirmIn(now time.Duration) time.Duration {
	l := &in.slotLimit
	if !l.queued || l.limit.get() > 0 || in.poolLimit() > 0 {
		return 0
	}
	return max(slotConfirm-(now-l.since), 0)
}

// poolLimit is the most running limit learned on any instance of the pool,
// where it holds for in (in has shown no more running than that); else 0.
func (in *instance) poolLimit() int {
	if p := int(in.poolSlots.Load()); p > 0 && in.slotLimit.seen.get() <= p {
		return p
	}
	return 0
}

// slots is the running limit the instance's estimate uses now.
func (in *instance) slots() int {
	n := in.slotLimit.limit.get()
	only := in.slotLimit.only.get() == 1
	switch {
	case n > 0 && only:
		return n
	case n > 0 && in.slotLimit.lasting.get() == 1 && in.engineRunning.get() >= n && in.queueLeft():
		return n
	case only:
		if p := in.poolLimit(); p > 0 {
			return p
		}
	}
	return in.est.cfg.MaxSeqs
}

// otherReplicas is the number of router replicas besides this one.
func (in *instance) otherReplicas() int {
	if in.replicas == nil {
		return 0
	}
	return max(int(in.replicas.Load())-1, 0)
}
