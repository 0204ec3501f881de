package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/scheduler"
)

// Spec is one policy variant of a sweep, written as
//
//	name[(key=value,...)]
//
// e.g. `dualmap`, `dualmap(choice=min-ttft)`, `dualmap(rebalance=false,candidates=3)`.
// Keys are the policy's parameters, the scheduler settings that have a
// simulator key in config.SchedulerSettings (the table the router's file
// and the sim's flags use too: candidates, key_depth, split, merge,
// window, order, late, late_idle_running, max_running, max_queue_wait,
// oldest_wait, held, learn, per_token_seconds; max_running=-1: no limit even when
// --max-running sets one), and the simulator's own: budget (router-queue
// budget in tokens; -1: no router queue), rebalance_slo (the rebalancer's
// hotspot threshold as a fraction of the SLO), load (prefill: the TTFT
// estimate counts pending prefill only; full, the default: all the work),
// replicate (false: hot keys that cannot be split are not replicated) and
// the imperfect-information keys.
type Spec struct {
	Label  string
	Policy string
	Params scheduler.Params
	// Settings are the scheduler settings given, in order (a later one
	// wins): config.SchedulerSettings keys and their values as written.
	Settings []Setting
	Budget   int
	// RebalanceSLO sets the rebalancer's hotspot threshold to the pending
	// prefill tokens the router's per-token cost clears in this fraction
	// of the SLO (0: the scheduler's default, the whole SLO).
	RebalanceSLO float64
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

// Setting is one scheduler setting of a Spec.
type Setting struct{ Key, Value string }

// PaperPreset is the name of the DualMap variant with the paper's literal
// settings: a pair (2 rings), split above 2/n and merge below 1/n over the
// last 200 requests, the load switch at half the SLO (the authors' code)
// whether or not the other candidate meets it (hopeless=load), tie 0 (only
// strictly longer cached prefixes win), no overflow, no reach outside the
// candidate set, the per-token cost fixed at the prior (no online
// learning), no router queue (every request goes straight to the engine,
// as the baselines in paper mode) and the
// rebalancer's hotspot threshold at the tokens one instance clears in half
// the SLO; its TTFT estimate counts pending prefill only and hot keys are
// not replicated (neither is in the paper). Our tuned defaults stay the
// policy "dualmap".
const PaperPreset = "dualmap-paper"

// paperSpec returns the paper preset's settings.
func paperSpec(label string) Spec {
	return Spec{
		Label: label, Policy: "dualmap",
		Params:   scheduler.Params{"headroom": "0.5", "hopeless": "load", "tie": "0", "overflow": "none", "home": "0", "reach": "0"},
		Settings: []Setting{{"candidates", "2"}, {"split", "2"}, {"merge", "1"}, {"window", "200"}, {"learn", "-1"}},
		Budget:   -1, RebalanceSLO: 0.5,
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
		if st, ok := config.LookupSchedulerSetting(k); ok {
			var scratch scheduler.Config
			if err := st.Set(&scratch, v); err != nil {
				return sp, fmt.Errorf("sim: policy %q: %s: %v", s, k, err)
			}
			sp.Settings = append(sp.Settings, Setting{k, v})
			continue
		}
		var err error
		switch k {
		case "budget":
			sp.Budget, err = strconv.Atoi(v)
		case "rebalance_slo":
			sp.RebalanceSLO, err = strconv.ParseFloat(v, 64)
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
	for _, kv := range sp.Settings {
		st, _ := config.LookupSchedulerSetting(kv.Key)
		_ = st.Set(&o.Scheduler, kv.Value) // ParseSpec checked both
	}
	if sp.Budget != 0 {
		o.Budget = sp.Budget
	}
	if sp.RebalanceSLO > 0 {
		o.RebalanceSLO = sp.RebalanceSLO
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
	return o
}
