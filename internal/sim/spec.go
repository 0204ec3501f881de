package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Spec is one policy variant of a sweep, written as
//
//	name[(key=value,...)]
//
// e.g. `dualmap`, `dualmap(choice=min-ttft)`, `dualmap(rebalance=false,candidates=3)`.
// Keys are the policy's parameters, plus some that set the scheduler
// around it: candidates (rings, 1-4), key_depth (a fixed key length in
// blocks; 0 = adaptive), budget (router-queue budget in tokens; -1: no
// router queue), split and merge (the key-depth split and merge factors:
// split above split/n of the traffic, merge below merge/n), rebalance_slo
// (the rebalancer's hotspot threshold as a fraction of the SLO), slo_share
// (the adaptive admission rule's share of the SLO), window
// (the key-depth window in requests), order and late (the router queue's
// order and its handling of late requests, see scheduler.QueueConfig),
// oldest_wait (seconds: the rebalancer's OldestWait), learn (the TTFT
// estimator's LearnRate; negative: never learned) and max_running (the
// router queue's limit on requests in flight per instance, -1: none), load
// (prefill: the TTFT estimate counts pending prefill only; full, the
// default: all the work) and replicate (false: hot keys that cannot be
// split are not replicated).
type Spec struct {
	Label      string
	Policy     string
	Params     scheduler.Params
	Candidates int
	KeyDepth   int
	Budget     int
	Split      float64 // key-depth split factor (x 1/n)
	Merge      float64 // key-depth merge factor (x 1/n)
	Window     int     // key-depth window in requests
	Order      string  // router-queue order (scheduler.OrderDeadline, OrderCache)
	Late       string  // router-queue handling of late requests (scheduler.LateServe...)
	OldestWait float64 // rebalancer: hotspot when the oldest queued request waited this long (s)
	Learn      float64 // estimator learn rate (negative: no learning)
	MaxRunning int     // router queue: requests in flight per instance (-1: no limit)
	// RebalanceSLO sets the rebalancer's hotspot threshold to the pending
	// prefill tokens the router's per-token cost clears in this fraction
	// of the SLO (0: the scheduler's default, the whole SLO).
	RebalanceSLO float64
	// SLOShare is the adaptive admission rule's share of the SLO
	// (scheduler.QueueConfig.SLOShare; key slo_share).
	SLOShare float64
	// Imperfect information (Options.Info), when set: cost_prior (factor),
	// index_delay (ms), index_drop (probability), metrics_poll (ms; -1:
	// never).
	CostPrior   float64
	IndexDelay  float64
	IndexDrop   float64
	MetricsPoll float64
	// PrefillLoad makes the TTFT estimate count only pending prefill, as
	// the paper's does (key load=prefill; default load=full: the request
	// cost, decode batch, slot wait and memory terms of
	// scheduler.CostConfig too). NoReplicas turns off the replication of
	// hot keys that cannot be split (key replicate=false).
	PrefillLoad bool
	NoReplicas  bool
}

// PaperPreset is the name of the DualMap variant with the paper's literal
// settings: a pair (2 rings), split above 2/n and merge below 1/n over the
// last 200 requests, the load switch at half the SLO (the authors' code)
// whether or not the other candidate meets it (hopeless=load), tie 0 (only
// strictly longer cached prefixes win), no overflow, the per-token cost
// fixed at the prior (no online learning), no router queue (every request
// goes straight to the engine, as the baselines in paper mode) and the
// rebalancer's hotspot threshold at the tokens one instance clears in half
// the SLO; its TTFT estimate counts pending prefill only and hot keys are
// not replicated (neither is in the paper). Our tuned defaults stay the
// policy "dualmap".
const PaperPreset = "dualmap-paper"

// paperSpec returns the paper preset's settings.
func paperSpec(label string) Spec {
	return Spec{
		Label: label, Policy: "dualmap",
		Params:     scheduler.Params{"headroom": "0.5", "hopeless": "load", "tie": "0", "overflow": "none"},
		Candidates: 2, Split: 2, Merge: 1, Window: 200,
		Learn: -1, Budget: -1, RebalanceSLO: 0.5,
		PrefillLoad: true, NoReplicas: true,
	}
}

// ParseSpec parses one policy variant. The name dualmap-paper stands for
// DualMap with the paper's settings (PaperPreset); parameters given in
// parentheses override them.
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	sp := Spec{Label: s, Policy: s}
	name, _, _ := strings.Cut(s, "(")
	if name == PaperPreset {
		sp = paperSpec(s)
	}
	open := strings.IndexByte(s, '(')
	if open < 0 {
		if s == "" {
			return sp, fmt.Errorf("sim: empty policy")
		}
		return sp, nil
	}
	if !strings.HasSuffix(s, ")") || open == 0 {
		return sp, fmt.Errorf("sim: policy %q: want name(key=value,...)", s)
	}
	if name != PaperPreset {
		sp.Policy = s[:open]
		sp.Params = scheduler.Params{}
	}
	body := s[open+1 : len(s)-1]
	if strings.TrimSpace(body) == "" {
		return sp, nil
	}
	for _, kv := range strings.Split(body, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return sp, fmt.Errorf("sim: policy %q: %q is not key=value", s, kv)
		}
		var err error
		switch k {
		case "candidates":
			sp.Candidates, err = strconv.Atoi(v)
		case "key_depth":
			sp.KeyDepth, err = strconv.Atoi(v)
		case "budget":
			sp.Budget, err = strconv.Atoi(v)
		case "split":
			sp.Split, err = strconv.ParseFloat(v, 64)
		case "merge":
			sp.Merge, err = strconv.ParseFloat(v, 64)
		case "rebalance_slo":
			sp.RebalanceSLO, err = strconv.ParseFloat(v, 64)
		case "slo_share":
			sp.SLOShare, err = strconv.ParseFloat(v, 64)
		case "window":
			sp.Window, err = strconv.Atoi(v)
		case "order":
			sp.Order = v
		case "late":
			sp.Late = v
		case "oldest_wait":
			sp.OldestWait, err = strconv.ParseFloat(v, 64)
		case "max_running":
			sp.MaxRunning, err = strconv.Atoi(v)
		case "learn":
			sp.Learn, err = strconv.ParseFloat(v, 64)
		case "cost_prior":
			sp.CostPrior, err = strconv.ParseFloat(v, 64)
		case "index_delay":
			sp.IndexDelay, err = strconv.ParseFloat(v, 64)
		case "index_drop":
			sp.IndexDrop, err = strconv.ParseFloat(v, 64)
		case "metrics_poll":
			sp.MetricsPoll, err = strconv.ParseFloat(v, 64)
		case "load":
			switch v {
			case "prefill", "full":
				sp.PrefillLoad = v == "prefill"
			default:
				return sp, fmt.Errorf("sim: policy %q: load: want prefill or full, got %q", s, v)
			}
		case "replicate":
			var b bool
			b, err = strconv.ParseBool(v)
			sp.NoReplicas = !b
		default:
			sp.Params[k] = v
		}
		if err != nil {
			return sp, fmt.Errorf("sim: policy %q: %s: %q is not a number", s, k, v)
		}
		if err := sp.checkInfo(); err != nil {
			return sp, fmt.Errorf("sim: policy %q: %w", s, err)
		}
	}
	return sp, nil
}

// checkInfo rejects impossible imperfect-information keys, naming them.
func (sp Spec) checkInfo() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case sp.SLOShare < 0 || sp.SLOShare > 1 || !finite(sp.SLOShare):
		return fmt.Errorf("slo_share must be in (0, 1], got %v", sp.SLOShare)
	case sp.RebalanceSLO < 0 || !finite(sp.RebalanceSLO):
		return fmt.Errorf("rebalance_slo must be a positive fraction of the SLO, got %v", sp.RebalanceSLO)
	case sp.CostPrior < 0 || !finite(sp.CostPrior):
		return fmt.Errorf("cost_prior must be a positive factor, got %v", sp.CostPrior)
	case sp.IndexDelay < 0 || !finite(sp.IndexDelay) || sp.IndexDelay > 1e9:
		return fmt.Errorf("index_delay must be a number of ms in [0, 1e9], got %v", sp.IndexDelay)
	case !(sp.IndexDrop >= 0 && sp.IndexDrop <= 1):
		return fmt.Errorf("index_drop must be a probability in [0, 1], got %v", sp.IndexDrop)
	case !finite(sp.MetricsPoll) || math.Abs(sp.MetricsPoll) > 1e9:
		return fmt.Errorf("metrics_poll must be a number of ms (-1: never), got %v", sp.MetricsPoll)
	}
	return nil
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// apply returns o configured for this variant.
func (sp Spec) apply(o Options) Options {
	o.Policy, o.Params = sp.Policy, sp.Params
	if sp.Candidates > 0 {
		o.Scheduler.Candidates = sp.Candidates
	}
	if sp.KeyDepth > 0 {
		o.Scheduler.KeyDepth.Fixed = sp.KeyDepth
	}
	if sp.Budget != 0 {
		o.Budget = sp.Budget
	}
	if sp.Split > 0 {
		o.Scheduler.KeyDepth.SplitFactor = sp.Split
	}
	if sp.Merge > 0 {
		o.Scheduler.KeyDepth.MergeFactor = sp.Merge
	}
	if sp.SLOShare > 0 {
		o.Scheduler.Queue.SLOShare = sp.SLOShare
	}
	if sp.RebalanceSLO > 0 {
		o.RebalanceSLO = sp.RebalanceSLO
	}
	if sp.Window > 0 {
		o.Scheduler.KeyDepth.Window = sp.Window
	}
	if sp.Order != "" {
		o.Scheduler.Queue.Order = sp.Order
	}
	if sp.Late != "" {
		o.Scheduler.Queue.Late = sp.Late
	}
	if sp.MaxRunning != 0 {
		o.Scheduler.Queue.MaxRunning = sp.MaxRunning
	}
	if sp.Learn != 0 {
		o.Scheduler.Cost.LearnRate = sp.Learn
	}
	if sp.CostPrior > 0 {
		o.Info.CostPrior = sp.CostPrior
	}
	if sp.IndexDelay > 0 {
		o.Info.IndexDelay = millis(sp.IndexDelay)
	}
	if sp.IndexDrop > 0 {
		o.Info.IndexDrop = sp.IndexDrop
	}
	if sp.MetricsPoll != 0 {
		o.Info.MetricsPoll = millis(sp.MetricsPoll)
	}
	if sp.PrefillLoad {
		c := &o.Scheduler.Cost
		c.RequestTokens, c.StepBase, c.DecodePerSeq, c.MemoryWeight = -1, -1, -1, -1
		c.MaxSeqs = 1 << 30 // no slot wait
	}
	if sp.NoReplicas {
		o.Scheduler.KeyDepth.MaxReplicas = -1
	}
	if sp.OldestWait > 0 {
		o.Scheduler.Rebalance.OldestWait = time.Duration(sp.OldestWait * float64(time.Second))
	}
	return o
}
