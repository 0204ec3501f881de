package sim

import (
	"fmt"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/scheduler"
)

// Queue modes: where requests wait.
const (
	// QueueRouter gives every policy the same router-side queues.
	QueueRouter = "router"
	// QueueEngine sends every request straight to the engine's FCFS queue.
	QueueEngine = "engine"
	// QueuePaper is the DualMap authors' setup: DualMap with router queues,
	// the baselines straight to the engine.
	QueuePaper = "paper"
)

// ScaleStep changes the number of instances at a point of simulated time.
type ScaleStep struct {
	At        time.Duration
	Instances int
}

// Options configure one simulated run. Zero values mean the defaults noted.
type Options struct {
	Policy string           // default the scheduler's, "dualmap"
	Params scheduler.Params // the policy's parameters
	Queue  string           // QueueRouter (default), QueueEngine or QueuePaper
	// Budget is the router queue's admission budget in pending prefill
	// tokens per instance, where router queues are used (default
	// DefaultBudget).
	Budget    int
	Instances int            // default 8
	Profile   engine.Profile // default the qwen2.5-7b-910b4 profile
	SLO       time.Duration  // TTFT objective, default the scheduler's, 5s
	// Replicas is the number of router replicas (default 1). Each request
	// goes to a random one; each knows its own dispatches at once. Every
	// SyncInterval they run serve's coordination rounds (package
	// internal/coord, over an in-process hub instead of Redis): each learns
	// the others' load, the prefixes they dispatched and the leader's
	// key-depth splits as published at the others' previous round, and
	// migrates queued requests only from instances it holds a lease on,
	// as serve does. SyncInterval 0: never, i.e. independent replicas that
	// share nothing and rebalance on their own.
	Replicas     int
	SyncInterval time.Duration
	Seed         uint64
	// Warmup is how many leading requests are left out of the metrics
	// (default 500; negative: none).
	Warmup int
	Scale  []ScaleStep
	// Tick is how often the scheduler's periodic work runs (default 100ms).
	Tick time.Duration
	// Horizon is how long after the last arrival the run may go on; what
	// has not finished by then counts as a miss (default max(120s, 20 x SLO)).
	Horizon time.Duration
	// Scheduler is the base scheduler configuration (key depth, rebalance,
	// candidates, cost learning...). Policy, Params, SLO, Queue.Budget,
	// BlockSize, CacheTokens and Now are set by the simulator.
	Scheduler scheduler.Config
	// Timeline records every instance's load once a second.
	Timeline bool
}

// DefaultBudget is the default router-queue admission budget, the router's
// (limits.queue_budget_tokens): one engine step's worth of prefill tokens.
const DefaultBudget = config.DefaultQueueBudget

func (o Options) withDefaults() (Options, error) {
	sd := scheduler.DefaultConfig()
	if o.Policy == "" {
		o.Policy = sd.Policy
	}
	if o.Queue == "" {
		o.Queue = QueueRouter
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.Instances == 0 {
		o.Instances = 8
	}
	if o.Profile.Name == "" {
		p, err := engine.LoadProfile("qwen2.5-7b-910b4")
		if err != nil {
			return o, err
		}
		o.Profile = p
	}
	if o.SLO == 0 {
		o.SLO = sd.SLO
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Warmup == 0 {
		o.Warmup = 500
	}
	// A negative Warmup stays negative (none): withDefaults must be
	// idempotent, since a sweep applies it to its base and again per run.
	if o.Tick == 0 {
		o.Tick = 100 * time.Millisecond
	}
	if o.Horizon == 0 {
		o.Horizon = max(120*time.Second, 20*o.SLO)
	}
	switch {
	case o.Queue != QueueRouter && o.Queue != QueueEngine && o.Queue != QueuePaper:
		return o, fmt.Errorf("sim: queue mode %q is not one of router, engine, paper", o.Queue)
	case o.Instances < 1:
		return o, fmt.Errorf("sim: instances must be >= 1, got %d", o.Instances)
	case o.Replicas < 1:
		return o, fmt.Errorf("sim: replicas must be >= 1, got %d", o.Replicas)
	case o.Budget < 0:
		return o, fmt.Errorf("sim: budget must be >= 0, got %d", o.Budget)
	case o.SLO < 0 || o.SyncInterval < 0 || o.Tick < 0 || o.Horizon < 0:
		return o, fmt.Errorf("sim: durations must be positive")
	}
	for i, s := range o.Scale {
		if s.Instances < 1 || s.At < 0 {
			return o, fmt.Errorf("sim: scale step %d (%v:%d): want a time >= 0 and >= 1 instance", i, s.At, s.Instances)
		}
	}
	if err := o.Profile.Validate(); err != nil {
		return o, fmt.Errorf("sim: %w", err)
	}
	return o, nil
}

// budget returns the router-queue budget the policy gets in this mode.
func (o Options) budget() int {
	switch {
	case o.Queue == QueueRouter:
		return o.Budget
	case o.Queue == QueuePaper && o.Policy == "dualmap":
		return o.Budget
	}
	return 0
}

// engineModel names p's engine model for reports: empty for the legacy one.
func engineModel(p engine.Profile) string {
	switch {
	case p.Legacy():
		return ""
	case p.EngineModel == "":
		return engine.ModelRealistic
	}
	return p.EngineModel
}
