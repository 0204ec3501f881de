package sim

import (
	"fmt"
	"math"
	"strings"
	"time"

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
	// tokens per instance, where router queues are used (default 0: the
	// adaptive rule, scheduler.QueueConfig.Adaptive, as the router's
	// default; negative: no router queue in any mode).
	Budget int
	// RebalanceSLO, when > 0, sets the rebalancer's hotspot threshold
	// (Scheduler.Rebalance.PendingTokens) to the tokens the router's prior
	// per-token cost clears in this fraction of the SLO.
	RebalanceSLO float64
	Instances    int            // default 8
	Profile      engine.Profile // default the qwen2.5-7b-910b4 profile
	SLO          time.Duration  // TTFT objective, default the scheduler's, 5s
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

	// Imperfect information (zero values: exact). See Info.
	Info Info
}

// Info is what the routers know, and how well: each field's zero value is
// exact information.
type Info struct {
	// CostPrior multiplies the router's prior per-token prefill cost
	// (the profile's PrefillPerToken, unless Scheduler.Cost.PerToken is
	// set): 3 starts the TTFT estimator three times too pessimistic. Its
	// online learning (Scheduler.Cost.LearnRate) has to correct it.
	// 0 or 1: exact. Spec key cost_prior, flag --cost-prior.
	CostPrior float64
	// IndexDelay delays what a router records in its cache index (its
	// estimate of what each instance cached) by this long after a
	// dispatch, as when the index is fed by the engines' KV-cache events.
	// Spec key index_delay (ms), flag --index-delay.
	IndexDelay time.Duration
	// IndexDrop loses such a record with this probability (seeded by
	// Options.Seed). Spec key index_drop, flag --index-drop.
	IndexDrop float64
	// MetricsPoll is how often the routers read the engines' own load
	// (waiting and running requests, scheduler.SetEngineLoad): 0 at every
	// change (exact), > 0 every MetricsPoll, < 0 never. Spec key
	// metrics_poll (ms), flag --metrics-poll.
	MetricsPoll time.Duration
}

// reported reports whether cache-index records go through the delayed or
// lossy path.
func (in Info) reported() bool { return in.IndexDelay > 0 || in.IndexDrop > 0 }

// String describes the imperfect information, "" when exact.
func (in Info) String() string {
	var parts []string
	if in.CostPrior != 0 && in.CostPrior != 1 {
		parts = append(parts, fmt.Sprintf("cost_prior=%g", in.CostPrior))
	}
	if in.IndexDelay > 0 {
		parts = append(parts, fmt.Sprintf("index_delay=%v", in.IndexDelay))
	}
	if in.IndexDrop > 0 {
		parts = append(parts, fmt.Sprintf("index_drop=%g", in.IndexDrop))
	}
	switch {
	case in.MetricsPoll > 0:
		parts = append(parts, fmt.Sprintf("metrics_poll=%v", in.MetricsPoll))
	case in.MetricsPoll < 0:
		parts = append(parts, "metrics_poll=never")
	}
	return strings.Join(parts, " ")
}

func (in Info) validate() error {
	switch {
	case in.CostPrior < 0 || math.IsNaN(in.CostPrior) || math.IsInf(in.CostPrior, 0):
		return fmt.Errorf("sim: cost_prior must be a positive factor (0: exact), got %v", in.CostPrior)
	case in.IndexDelay < 0:
		return fmt.Errorf("sim: index_delay must be >= 0, got %v", in.IndexDelay)
	case !(in.IndexDrop >= 0 && in.IndexDrop <= 1):
		return fmt.Errorf("sim: index_drop must be a probability in [0, 1], got %v", in.IndexDrop)
	}
	return nil
}

func (o Options) withDefaults() (Options, error) {
	sd := scheduler.DefaultConfig()
	if o.Policy == "" {
		o.Policy = sd.Policy
	}
	if o.Queue == "" {
		o.Queue = QueueRouter
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
	o.Profile = o.Profile.Resolved() // the values its engine model uses
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
	case o.RebalanceSLO < 0 || math.IsNaN(o.RebalanceSLO) || math.IsInf(o.RebalanceSLO, 0):
		return o, fmt.Errorf("sim: rebalance_slo must be a positive fraction, got %v", o.RebalanceSLO)
	case o.SLO < 0 || o.SyncInterval < 0 || o.Tick < 0 || o.Horizon < 0:
		return o, fmt.Errorf("sim: durations must be positive")
	}
	for i, s := range o.Scale {
		if s.Instances < 1 || s.At < 0 {
			return o, fmt.Errorf("sim: scale step %d (%v:%d): want a time >= 0 and >= 1 instance", i, s.At, s.Instances)
		}
	}
	if err := o.Info.validate(); err != nil {
		return o, err
	}
	if err := o.Profile.Validate(); err != nil {
		return o, fmt.Errorf("sim: %w", err)
	}
	return o, nil
}

// admission returns the router-queue budget the policy gets in this mode,
// or adaptive for the adaptive rule.
func (o Options) admission() (budget int, adaptive bool) {
	switch {
	case o.Budget < 0:
		return 0, false
	case o.Queue == QueueRouter, o.Queue == QueuePaper && o.Policy == "dualmap":
		return o.Budget, o.Budget == 0
	}
	return 0, false
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
