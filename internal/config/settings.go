package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// SchedulerSetting is one field of scheduler.Config that users set by
// name. SchedulerSettings is the one table of them: the router's file
// (YAML), the simulator's policy variants (Key, as in
// `dualmap(max_running=64)`) and its flags (Flag, --max-running) all reach
// the scheduler through it, so a new setting is one row.
type SchedulerSetting struct {
	// Key is the setting's name in a simulator spec; "" when the simulator
	// sets the field itself (block size and cache size come from its
	// engine profile; SLO and queue budget are its own options, --slo and
	// --budget, which also drive its queue modes and report).
	Key string
	// YAML is the key in the router's file: a top-level path, or
	// "pools[]." and the pool's own key; "" when the file does not have it
	// (simulator experiments only).
	YAML string
	// Help describes the setting for its flag.
	Help string
	// fromYAML returns the setting's value in a parsed file, as its field
	// takes it.
	fromYAML func(c Config, p Pool) any
	// field returns the setting's field in s: an *int, *float64, *string
	// or *time.Duration.
	field func(s *scheduler.Config) any
}

// SchedulerSettings returns the table, in a fixed order.
func SchedulerSettings() []SchedulerSetting { return schedulerSettings }

var schedulerSettings = []SchedulerSetting{
	{YAML: "slo.default", fromYAML: func(c Config, _ Pool) any { return c.SLO.Default },
		field: func(s *scheduler.Config) any { return &s.SLO }},
	// Negative in the file: no router queue, the scheduler's 0; 0: the
	// adaptive rule (SchedulerConfig sets Queue.Adaptive).
	{YAML: "limits.queue_budget_tokens", fromYAML: func(c Config, _ Pool) any { return max(c.Limits.QueueBudgetTokens, 0) },
		field: func(s *scheduler.Config) any { return &s.Queue.Budget }},
	{Key: "slo_share", YAML: "limits.queue_slo_share", fromYAML: func(c Config, _ Pool) any { return c.Limits.QueueSLOShare },
		Help:  "the adaptive router-queue rule's share of the SLO that the work ahead on an instance may take, in (0, 1] (0: the scheduler's default, 0.125)",
		field: func(s *scheduler.Config) any { return &s.Queue.SLOShare }},
	{Key: "max_queue_wait", YAML: "limits.max_queue_wait", fromYAML: func(c Config, _ Pool) any { return c.Limits.MaxQueueWait },
		Help:  "longest wait in a router queue before a request fails (a Go duration or seconds; 0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.Queue.MaxWait }},
	{Key: "order", YAML: "limits.queue_order", fromYAML: func(c Config, _ Pool) any { return c.Limits.QueueOrder },
		Help:  "router-queue order: deadline | cache (empty: deadline)",
		field: func(s *scheduler.Config) any { return &s.Queue.Order }},
	{Key: "late", YAML: "limits.late_requests", fromYAML: func(c Config, _ Pool) any { return c.Limits.LateRequests },
		Help:  "what the deadline order does with a late request: idle | serve | reject (empty: idle)",
		field: func(s *scheduler.Config) any { return &s.Queue.Late }},
	{Key: "late_idle_running", YAML: "limits.late_idle_running", fromYAML: func(c Config, _ Pool) any { return c.Limits.LateIdleRunning },
		Help:  "an instance with fewer requests in flight than this counts as idle for late requests (0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.Queue.IdleRunning }},
	{Key: "max_running", YAML: "limits.max_running", fromYAML: func(c Config, _ Pool) any { return c.Limits.MaxRunning },
		Help:  "router queues send an instance no more than this many requests in flight, as limits.max_running (0: no limit, the router's default)",
		field: func(s *scheduler.Config) any { return &s.Queue.MaxRunning }},
	{Key: "held", Help: "whether the blocks of requests held in a router queue count for the cache lookup of later arrivals: on | estimate | split | off (empty: on; scheduler/held.go)",
		field: func(s *scheduler.Config) any { return &s.Queue.Held }},
	{YAML: "pools[].block_size", fromYAML: func(_ Config, p Pool) any { return p.BlockSize },
		field: func(s *scheduler.Config) any { return &s.BlockSize }},
	{Key: "candidates", YAML: "pools[].candidates", fromYAML: func(_ Config, p Pool) any { return p.Candidates },
		Help:  "candidates per key, i.e. hash rings, 1-4 (0: the scheduler's default, 4)",
		field: func(s *scheduler.Config) any { return &s.Candidates }},
	{YAML: "pools[].cache_tokens", fromYAML: func(_ Config, p Pool) any { return p.CacheTokens },
		field: func(s *scheduler.Config) any { return &s.CacheTokens }},
	{YAML: "pools[].max_seqs", fromYAML: func(_ Config, p Pool) any { return p.MaxSeqs },
		field: func(s *scheduler.Config) any { return &s.Cost.MaxSeqs }},
	{Key: "per_token_seconds", YAML: "pools[].per_token_seconds", fromYAML: func(_ Config, p Pool) any { return p.PerTokenSeconds },
		Help:  "the TTFT estimator's prior prefill cost per uncached token, in seconds (0: the engine profile's)",
		field: func(s *scheduler.Config) any { return &s.Cost.PerToken }},
	{YAML: "pools[].policy.name", fromYAML: func(_ Config, p Pool) any { return p.Policy.Name },
		field: func(s *scheduler.Config) any { return &s.Policy }},
	{Key: "key_depth", Help: "a fixed key length in blocks (0: adaptive)",
		field: func(s *scheduler.Config) any { return &s.KeyDepth.Fixed }},
	{Key: "split", Help: "key depth: split a prefix above split/n of the traffic (0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.KeyDepth.SplitFactor }},
	{Key: "merge", Help: "key depth: merge a prefix back below merge/n of the traffic (0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.KeyDepth.MergeFactor }},
	{Key: "window", Help: "key depth: the window, in requests (0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.KeyDepth.Window }},
	{Key: "oldest_wait", Help: "rebalancer: an instance is a hotspot when its oldest queued request waited this long (a Go duration or seconds; 0: the scheduler's default)",
		field: func(s *scheduler.Config) any { return &s.Rebalance.OldestWait }},
	{Key: "learn", Help: "the TTFT estimator's learning rate (0: the scheduler's default; negative: never learned)",
		field: func(s *scheduler.Config) any { return &s.Cost.LearnRate }},
}

// LookupSchedulerSetting returns the setting whose Key is key.
func LookupSchedulerSetting(key string) (SchedulerSetting, bool) {
	for _, s := range schedulerSettings {
		if s.Key != "" && s.Key == key {
			return s, true
		}
	}
	return SchedulerSetting{}, false
}

// Flag is the setting's command-line flag: Key with dashes.
func (st SchedulerSetting) Flag() string { return strings.ReplaceAll(st.Key, "_", "-") }

// Set parses v as the setting's value and stores it in s. Integers and
// floats are Go numbers; durations are Go durations ("2s", "750ms") or a
// number of seconds ("2"). The error names the value, not the key: the
// caller knows how the user spelled it.
func (st SchedulerSetting) Set(s *scheduler.Config, v string) error {
	switch f := st.field(s).(type) {
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*f = n
	case *float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		*f = x
	case *string:
		*f = v
	case *time.Duration:
		if d, err := time.ParseDuration(v); err == nil {
			*f = d
			break
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x != x || x > float64(1<<62)/float64(time.Second) || x < -float64(1<<62)/float64(time.Second) {
			return fmt.Errorf("%q is not a duration (a Go duration or a number of seconds)", v)
		}
		*f = time.Duration(x * float64(time.Second))
	default:
		panic(fmt.Sprintf("config: scheduler setting %s: field of type %T", st.Key, f))
	}
	return nil
}

// setFromYAML stores the setting's value in the parsed file in s.
func (st SchedulerSetting) setFromYAML(s *scheduler.Config, c Config, p Pool) {
	switch f := st.field(s).(type) {
	case *int:
		*f = st.fromYAML(c, p).(int)
	case *float64:
		*f = st.fromYAML(c, p).(float64)
	case *string:
		*f = st.fromYAML(c, p).(string)
	case *time.Duration:
		*f = st.fromYAML(c, p).(time.Duration)
	default:
		panic(fmt.Sprintf("config: scheduler setting %s: field of type %T", st.YAML, f))
	}
}
