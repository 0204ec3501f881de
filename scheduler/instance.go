package scheduler

import (
	"fmt"
	"math"
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
	CostPerToken  float64
}

// instance is the scheduler's live state of one member. Guarded by
// Scheduler.mu.
type instance struct {
	Instance
	idx      int // position in Scheduler.members, -1 once removed
	healthy  bool
	draining bool

	kv  *kvIndex
	est *estimator // shared by the pool unless Cost.PerInstance

	queue         []*Request // router queue, unordered; see queue.go
	queuedTokens  int
	lateTokens    int // of queuedTokens, late requests' as of the last drain: they wait behind every other
	pendingTokens int
	running       int
	remote        Load // other replicas' contribution, as last reported
	// engine is what the instance itself last reported (its metrics), and
	// avgUncached an average of the uncached tokens of requests sent to it,
	// to turn the engine's queue length into tokens.
	engine      EngineLoad
	avgUncached float64

	// recent is an exponentially decayed sum of the uncached tokens of
	// requests routed here (Preble's windowed load), as of recentAt.
	recent   float64
	recentAt time.Duration
}

func (in *instance) ready() bool { return in.healthy && !in.draining && in.idx >= 0 }

// ahead is the prefill work, in tokens, a new request would queue behind:
// this replica's and the other replicas' as last reported, or, when the
// engine reports a longer queue of its own (traffic the routers do not
// see, estimates that drifted), that queue at the average request size.
func (in *instance) ahead() int {
	own := in.queuedTokens - in.lateTokens + in.pendingTokens + in.remote.QueuedTokens + in.remote.PendingTokens
	return max(own, int(float64(in.engine.Waiting)*in.avgUncached))
}

// EngineLoad is the load an instance reports about itself (e.g. vLLM's
// vllm:num_requests_waiting and vllm:num_requests_running).
type EngineLoad struct {
	Waiting, Running int
}

// requests is the number of requests running or queued for the instance,
// across replicas.
func (in *instance) requests() int {
	return in.running + len(in.queue) + in.remote.Running + in.remote.Queued
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

// addRecent adds tokens to the windowed load at now.
func (in *instance) addRecent(now time.Duration, tokens float64) {
	in.recent = in.recentLoad(now, prebleWindow) + tokens
	in.recentAt = now
}

// inFlight is the number of requests dispatched to the instance and not
// completed, by every replica (the others' as last reported).
func (in *instance) inFlight() int { return in.running + in.remote.Running }

// recentLoad returns the decayed windowed load at now with time constant tau.
func (in *instance) recentLoad(now, tau time.Duration) float64 {
	if in.recent == 0 || now <= in.recentAt {
		return in.recent
	}
	return in.recent * math.Exp(-float64(now-in.recentAt)/float64(tau))
}

func (in *instance) state() InstanceState {
	return InstanceState{
		ID: in.ID, Healthy: in.healthy, Draining: in.draining,
		Queued: len(in.queue), QueuedTokens: in.queuedTokens,
		PendingTokens: in.pendingTokens, Running: in.running, Remote: in.remote, Engine: in.engine,
		CachedBlocks: in.kv.len(), CostPerToken: in.est.cost,
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
