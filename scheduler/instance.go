package scheduler

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Instance describes one model-server instance of the pool.
type Instance struct {
	// ID is the stable identity, e.g. "10.0.0.7:8000". Ring positions
	// derive from it, so keep it stable across restarts.
	ID string
	// Weight scales the instance's share of each ring (0 means 1).
	Weight float64
	// CacheTokens is its KV-cache capacity in tokens (0 means
	// Config.CacheTokens).
	CacheTokens int
}

// InstanceState is a read-only report of one instance, for metrics and tests.
type InstanceState struct {
	ID            string
	Healthy       bool
	Draining      bool
	Queued        int        // requests in the router queue
	QueuedTokens  int        // their estimated uncached tokens
	PendingTokens int        // dispatched uncached tokens not yet through prefill
	Running       int        // dispatched and not completed
	Remote        Load       // other replicas' load as last reported (SetRemoteLoad)
	Engine        EngineLoad // the instance's own report (SetEngineLoad)
	CachedBlocks  int        // size of the KV index
	ExactCache    bool       // the KV index is the engine's report (SetExact), not a prediction
	CostPerToken  float64
	StepScale     float64   // learned scale of the step overhead (see estimator.go)
	ServiceTime   float64   // learned mean seconds a request holds a sequence slot
	Prefilling    int       // dispatched requests not yet through prefill
	Memory        float64   // KV memory in use as the estimate reads it (fraction)
	Estimate      TTFTTerms // estimated TTFT of a new fully cached request, by term
	AheadCost     float64   // learned marginal TTFT of a token of work ahead, seconds (admission.go)
	OwnCost       float64   // the same fit's marginal TTFT of a token of the request's own, seconds
	OwnCostFull   float64   // that cost for a request starting with SlotLimit running, seconds (busyfit.go; 0 until both are learned)
	EngineQueuing bool      // the engine queues requests it cannot start, as far as this replica can tell
	// Slots is the running limit the estimate's slot wait uses now: the
	// one learned from the engine's lasting queues while it shows one,
	// else the configured prior (slots.go); SlotLimit is the learned one
	// (0: none yet).
	Slots, SlotLimit int
}

// instance is the scheduler's live state of one member.
//
// Its load figures, KV index and windowed load are read by policies
// without a lock (atomics, see counter and blockSet) and changed under mu.
type instance struct {
	Instance
	seq      uint64 // creation order, for the lock order; immutable
	idx      int    // position in Scheduler.members, -1 once removed; guarded by Scheduler.mu
	healthy  bool   // guarded by Scheduler.mu
	draining bool   // guarded by Scheduler.mu

	est *estimator // shared by the pool unless Cost.PerInstance

	// mu guards queue, accepting and the state of the requests queued at
	// or dispatched to the instance, and orders the changes to every field
	// below.
	mu sync.Mutex
	// accepting is ready() as the published picker has it: whether new
	// requests may be queued or dispatched here.
	accepting bool
	queue     []*Request // router queue, unordered; see queue.go

	nqueued       counter // len(queue)
	queuedTokens  counter
	lateTokens    counter // of queuedTokens, late requests' as of the last drain: they wait behind every other
	onTimeTokens  counter // queuedTokens - lateTokens, set once both are updated: what readers without the lock use
	pendingTokens counter
	running       counter
	remote        remoteLoad // other replicas' contribution, as last reported
	// engine is what the instance itself last reported (its metrics), and
	// avgUncached an average of the uncached tokens of requests sent to it,
	// to turn the engine's queue length into tokens.
	engineWaiting, engineRunning counter
	engineKV                     atomicFloat // KV memory in use, fraction
	// sinceReport counts this replica's dispatches and completions there
	// since the engine's last report (admission.go).
	sinceReport struct{ dispatched, completed counter }
	// engineSlots is the engine's limit on running requests (max_num_seqs)
	// as far as seen: the most it reported running while it also reported
	// requests waiting (admission.go); 0 until then.
	engineSlots counter
	// slotLimit is the running limit learned from lasting queues, for
	// the estimate (slots.go).
	slotLimit slotLimit
	// replicas is the scheduler's SetReplicas count (queueLeft).
	replicas *atomic.Int64
	// poolSlots is the scheduler's most running limit learned on any
	// instance (slots.go).
	poolSlots   *atomic.Int64
	avgUncached atomicFloat
	// prefilling counts the dispatched requests not yet through prefill,
	// kvTokens the prompt tokens of those dispatched and not completed
	// (the router's own estimate of the KV memory they hold).
	prefilling, kvTokens counter

	kv *kvIndex
	// held has the blocks of the requests in queue (held.go). Guarded by
	// mu.
	held heldIndex
	// exact: kv is the engine's own report (KV events), and dispatches
	// add nothing to it (exact.go). Guarded by mu.
	exact bool
	// recent is an exponentially decayed sum of the uncached tokens of
	// requests routed here (Preble's windowed load), as of its time.
	recent windowed
}

// windowed is a value and the time it was taken at, read together without
// a lock while one writer at a time changes them: a sequence lock, odd
// while a write is under way.
type windowed struct {
	seq atomic.Uint64
	val atomicFloat
	at  atomic.Int64
}

func (w *windowed) load() (float64, time.Duration) {
	for {
		s := w.seq.Load()
		if s&1 != 0 {
			runtime.Gosched()
			continue
		}
		v, at := w.val.get(), w.at.Load()
		if w.seq.Load() == s {
			return v, time.Duration(at)
		}
	}
}

func (w *windowed) store(v float64, at time.Duration) {
	w.seq.Add(1)
	w.val.set(v)
	w.at.Store(int64(at))
	w.seq.Add(1)
}

// counter is a load figure that policies read while it changes.
type counter struct{ v atomic.Int64 }

func (c *counter) get() int  { return int(c.v.Load()) }
func (c *counter) add(n int) { c.v.Add(int64(n)) }
func (c *counter) set(n int) { c.v.Store(int64(n)) }

// atomicFloat is a float64 that policies read while it changes.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) get() float64  { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) set(v float64) { f.bits.Store(math.Float64bits(v)) }

// remoteLoad is Load, readable while SetRemoteLoad changes it.
type remoteLoad struct {
	Queued, QueuedTokens, PendingTokens, Running counter
}

func (l *remoteLoad) load() Load {
	return Load{Queued: l.Queued.get(), QueuedTokens: l.QueuedTokens.get(), PendingTokens: l.PendingTokens.get(), Running: l.Running.get()}
}

func (l *remoteLoad) store(v Load) {
	l.Queued.set(v.Queued)
	l.QueuedTokens.set(v.QueuedTokens)
	l.PendingTokens.set(v.PendingTokens)
	l.Running.set(v.Running)
}

func (in *instance) ready() bool { return in.healthy && !in.draining && in.idx >= 0 }

func (in *instance) setAccepting(ok bool) {
	in.mu.Lock()
	in.accepting = ok
	in.mu.Unlock()
}

// lockOwner locks the instance r is queued at or dispatched to and returns
// it, or returns nil for a request never routed. A request changes instance
// only under the lock of the one it leaves, so once that lock is held it
// stays put.
func lockOwner(r *Request) *instance {
	for {
		in := r.owner.Load()
		if in == nil {
			return nil
		}
		in.mu.Lock()
		if r.owner.Load() == in {
			return in
		}
		in.mu.Unlock()
	}
}

// ahead is the prefill work, in tokens, a new request would queue behind:
// this replica's and the other replicas' as last reported, or, when the
// engine reports a longer queue of its own (traffic the routers do not
// see, estimates that drifted), that queue at the average request size.
func (in *instance) ahead() int {
	own := in.onTimeTokens.get() + in.remote.QueuedTokens.get() + in.prefillPending()
	return max(own, int(float64(in.engineWaiting.get())*in.avgUncached.get()))
}

// prefillPending is the uncached prompt tokens dispatched to in and not yet
// through prefill: this replica's and the other replicas' as last
// reported (the engine's prefill work, no router queue's).
func (in *instance) prefillPending() int {
	return in.pendingTokens.get() + in.remote.PendingTokens.get()
}

// EngineLoad is the load an instance reports about itself (e.g. vLLM's
// vllm:num_requests_waiting, vllm:num_requests_running and
// vllm:kv_cache_usage_perc).
type EngineLoad struct {
	Waiting, Running int
	// KVUsage is the fraction of the engine's KV memory in use, in [0, 1]
	// (0 when not reported).
	KVUsage float64
}

// load is what the TTFT estimate reads of the instance now: the work this
// replica and the others put there, or the engine's own report where it
// says more.
func (in *instance) load() load {
	reqs := in.prefilling.get() + in.nqueued.get() + in.remote.Queued.get()
	slots := in.slots()
	return load{
		ahead:    in.ahead(),
		requests: max(reqs, in.engineWaiting.get()),
		running:  min(max(in.inFlight(), in.engineRunning.get()), slots),
		occupied: max(in.inFlight(), in.engineRunning.get()+in.engineWaiting.get()),
		slots:    slots,
		memory:   in.memory(),
	}
}

// memory is the fraction of the instance's KV memory in use: the engine's
// report, or the router's estimate from the prompts in flight there when
// Cost.KVTokens is set, whichever is higher.
func (in *instance) memory() float64 {
	m := in.engineKV.get()
	if kv := in.est.cfg.KVTokens; kv > 0 {
		m = max(m, float64(in.kvTokens.get())/float64(kv))
	}
	return m
}

// ttft is the estimated TTFT in seconds of a new request with uncached
// tokens of its own.
func (in *instance) ttft(uncached int) float64 { return in.est.ttft(in.load(), uncached) }

// ttftAt is ttft with ahead tokens of prefill work ahead instead of the
// instance's own figure (the rebalancer's what-if).
func (in *instance) ttftAt(ahead, uncached int) float64 {
	l := in.load()
	l.ahead = ahead
	return in.est.ttft(l, uncached)
}

// requests is the number of requests running or queued for the instance,
// across replicas.
func (in *instance) requests() int {
	return in.running.get() + in.nqueued.get() + in.remote.Running.get() + in.remote.Queued.get()
}

// Load is one replica's contribution to an instance's load.
type Load struct {
	Queued        int // requests waiting in the replica's router queue
	QueuedTokens  int // their estimated uncached tokens
	PendingTokens int // dispatched uncached tokens not yet through prefill
	Running       int // dispatched and not completed
}

// cachedTokens estimates how many of r's prompt tokens the instance holds.
func (in *instance) cachedTokens(r *Request, blockSize int) int {
	return min(in.kv.cachedBlocks(r.Blocks)*blockSize, r.Tokens)
}

// addKV records blocks as cached on the instance.
func (in *instance) addKV(blocks []uint64) {
	in.mu.Lock()
	in.kv.add(blocks)
	in.mu.Unlock()
}

// addRecentLocked adds tokens to the windowed load at now. The window's
// clock never goes back: a caller that read its now before another's later
// update adds its tokens undecayed at the later time.
func (in *instance) addRecentLocked(now time.Duration, tokens float64) {
	_, at := in.recent.load()
	in.recent.store(in.recentLoad(now, prebleWindow)+tokens, max(now, at))
}

// syncOnTime publishes queuedTokens - lateTokens after a change to either.
// The caller holds the instance lock.
func (in *instance) syncOnTime() {
	in.onTimeTokens.set(max(in.queuedTokens.get()-in.lateTokens.get(), 0))
}

// inFlight is the number of requests dispatched to the instance and not
// completed, by every replica (the others' as last reported).
func (in *instance) inFlight() int { return in.running.get() + in.remote.Running.get() }

// recentLoad returns the decayed windowed load at now with time constant tau.
func (in *instance) recentLoad(now, tau time.Duration) float64 {
	recent, at := in.recent.load()
	if recent == 0 || now <= at {
		return recent
	}
	return recent * math.Exp(-float64(now-at)/float64(tau))
}

func (in *instance) state() InstanceState {
	in.mu.Lock()
	blocks, exact := in.kv.len(), in.exact
	in.mu.Unlock()
	return InstanceState{
		ID: in.ID, Healthy: in.healthy, Draining: in.draining,
		Queued: in.nqueued.get(), QueuedTokens: in.queuedTokens.get(),
		PendingTokens: in.pendingTokens.get(), Running: in.running.get(), Remote: in.remote.load(),
		Engine:       EngineLoad{Waiting: in.engineWaiting.get(), Running: in.engineRunning.get(), KVUsage: in.engineKV.get()},
		CachedBlocks: blocks, ExactCache: exact, CostPerToken: in.est.cost(), StepScale: in.est.stepScale(), ServiceTime: in.est.serviceTime(),
		Prefilling: in.prefilling.get(), Memory: in.memory(),
		Estimate:  in.est.terms(in.load(), 0),
		AheadCost: in.est.ahead.cost(), OwnCost: in.est.ahead.own(), OwnCostFull: in.ownFull(), EngineQueuing: in.engineQueuing(),
		Slots: in.slots(), SlotLimit: in.slotLimit.limit.get(),
	}
}

func validateInstances(list []Instance) error {
	seen := make(map[string]bool, len(list))
	for i, in := range list {
		switch {
		case in.ID == "":
			return fmt.Errorf("instances[%d]: empty id", i)
		case seen[in.ID]:
			return fmt.Errorf("instances[%d]: duplicate id %q", i, in.ID)
		case in.Weight < 0 || math.IsNaN(in.Weight) || math.IsInf(in.Weight, 0):
			return fmt.Errorf("instances[%d] (%s): weight must be a finite number >= 0, got %g", i, in.ID, in.Weight)
		case in.CacheTokens < 0:
			return fmt.Errorf("instances[%d] (%s): cache_tokens must be >= 0, got %d", i, in.ID, in.CacheTokens)
		}
		seen[in.ID] = true
	}
	return nil
}
