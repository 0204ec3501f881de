package scheduler

import (
	"math"
	"sync"
)

// busyFit learns how what a token of a request's own prompt costs its
// first token grows with the sequences the engine runs beside it: the
// exponentially weighted least-squares fit
//
//	TTFT = b + a x ahead + c x own + e x own x running
//
// over first tokens of requests dispatched with a sequence slot free (no
// wait for one in their TTFT), where ahead is the prefill work they were
// dispatched behind (all replicas'), own their uncached tokens and running
// the requests in flight on the instance once they started, their own
// included. On llm-d's vLLM simulator a prompt's prefill takes up to twice
// as long with every slot taken as alone (its time-factor-under-load), and
// on vLLM a prefill shares its steps with the running sequences' decode:
// the admission fit's single c averages over the loads it saw, and priced
// a long cold prompt on an instance about to fill at 0.6-0.8 s that took
// 1.0 s (shared-prefix at 70% of capacity, docs/evaluation.md). The count,
// not its share of the slots: the limit the router knows changes as it
// learns it (slots.go). freeSlot (freeslot.go) reads the fit for the
// instance a request would move to, and DualMap's choice between
// candidates for a prompt cold on all of them (busyExtra, coldPick).
type busyFit struct {
	mu   sync.Mutex  // guards sums
	sums ewls3       // of TTFT on ahead, own, own x running
	ownv atomicFloat // c
	perv atomicFloat // e
	okv  atomicFloat // 1 once c and e are identified
}

// observe adds one first token: ttft seconds after a dispatch behind ahead
// tokens of prefill, with own uncached tokens, starting with running
// requests in flight.
func (f *busyFit) observe(ahead, own, running, ttft float64) {
	if !(ttft > 0) || math.IsInf(ttft, 0) || !(ahead >= 0) || !(own >= 0) || !(running >= 1) || math.IsInf(running, 0) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sums.add([3]float64{ahead, own, own * running}, ttft)
	if f.sums.n < aheadMinSamples {
		return
	}
	b, ok := solve3(f.sums.cov())
	if !ok {
		return
	}
	f.ownv.set(b[1])
	f.perv.set(b[2])
	f.okv.set(1)
}

// own returns the learned cost of a token of a request's own prompt, in
// seconds, when it starts with running requests in flight; ok is false
// until the fit is identified.
func (f *busyFit) own(running float64) (float64, bool) {
	if f.okv.get() != 1 {
		return 0, false
	}
	return max(f.ownv.get()+f.perv.get()*running, 0), true
}

// ownAt is the learned cost of a token of a request's own prompt when it
// starts with running requests in flight: busyFit's, or until that is
// identified the admission fit's (which does not tell loads apart).
func (in *instance) ownAt(running float64) float64 {
	if own, ok := in.est.busy.own(running); ok {
		return own
	}
	return in.est.ahead.own()
}

// busyExtra is what the estimate's per-token cost leaves out of uncached
// tokens of a request's own started on in now: the busy fit's cost of a
// token at the requests it would start beside, over the estimate's, where
// the admission fit has identified an engine that prefills requests side
// by side (on a step-bound engine the estimate's decode-batch term already
// grows with the running sequences); 0 elsewhere. On an engine whose slots
// are all taken the request starts when one frees, beside about as many as
// the fit has seen on average, so it is priced at the admission fit's
// cost, as freeSlot prices the instance it would leave. Never negative:
// like reach and freeSlot, it only adds what the estimate misses.
//
// On llm-d's simulator a long cold prompt's prefill time doubles between
// an idle engine and a full one. The conversation trace's prompts are
// mostly cold, so its choice between two candidates is by estimate, and
// without this term the estimate priced a long prompt alike on a candidate
// running two requests and one running fourteen (docs/evaluation.md, "A
// cold prompt's choice prices a busy engine").
func (in *instance) busyExtra(uncached int) float64 {
	if !in.est.ahead.parallel() {
		return 0
	}
	run := in.est.startRunning(in.load())
	if run < 0 {
		return in.reprice(uncached)
	}
	return in.repriceAt(in.ownAt(run), uncached)
}

// ownFull is own at the instance's learned limit on running requests
// (slots.go), or 0 until both are known.
func (in *instance) ownFull() float64 {
	n := in.slotLimit.limit.get()
	if n <= 0 {
		return 0
	}
	c, _ := in.est.busy.own(float64(n))
	return c
}
