package pool

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

func TestParseEngineMetrics(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		want  scheduler.EngineLoad
		found bool
	}{
		{"vllm", "# HELP vllm:num_requests_waiting x\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 7.0\nvllm:num_requests_running{model_name=\"m\"} 3\n", scheduler.EngineLoad{Waiting: 7, Running: 3}, true},
		{"ranks summed", "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} 5\n", scheduler.EngineLoad{Waiting: 7}, true},
		{"sglang", "sglang:num_queue_reqs{name=\"x\"} 4\nsglang:num_running_reqs 9\n", scheduler.EngineLoad{Waiting: 4, Running: 9}, true},
		{"labels with braces in values", "vllm:num_requests_waiting{a=\"}\"} 1\n", scheduler.EngineLoad{Waiting: 1}, true},
		{"vllm kv usage", "vllm:kv_cache_usage_perc{engine=\"0\"} 0.42\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.9\nvllm:num_requests_running 4\n", scheduler.EngineLoad{Running: 4, KVUsage: 0.9}, true},
		{"old vllm kv usage", "vllm:gpu_cache_usage_perc 0.25\n", scheduler.EngineLoad{KVUsage: 0.25}, true},
		{"sglang token usage", "sglang:token_usage{tp_rank=\"0\"} 0.5\n", scheduler.EngineLoad{KVUsage: 0.5}, true},
		{"kv usage out of range", "vllm:kv_cache_usage_perc 42\nvllm:kv_cache_usage_perc -0.1\n", scheduler.EngineLoad{}, false},
		{"llama.cpp", "# HELP llamacpp:requests_processing Number of requests processing.\n# TYPE llamacpp:requests_processing gauge\nllamacpp:prompt_tokens_total 4096\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 5\nllamacpp:n_busy_slots_per_decode 1.5\n", scheduler.EngineLoad{Waiting: 5, Running: 2}, true},
		{"other metrics only", "process_cpu_seconds_total 12\n", scheduler.EngineLoad{}, false},
		{"garbage", "vllm:num_requests_waiting{ NaNx\nvllm:num_requests_waiting -3\n{{{\n", scheduler.EngineLoad{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := parseEngineMetrics(strings.NewReader(tt.text))
			if got != tt.want || found != tt.found {
				t.Errorf("parseEngineMetrics() = %+v, %v; want %+v, %v", got, found, tt.want, tt.found)
			}
		})
	}
}

// With metrics polling on, an instance that reports a long queue of its own
// is seen as loaded.
func TestEngineMetricsPolling(t *testing.T) {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprintln(w, "vllm:num_requests_waiting{model_name=\"m\"} 12")
		}
	}))
	defer busy.Close()
	addr := strings.TrimPrefix(busy.URL, "http://")
	m := startManager(t, parseConfig(t, `
pools:
  - instances: [{address: "`+addr+`"}, {address: "`+healthyInstance(t)+`"}]
    metrics: {enabled: true, interval: 100ms}
`), true, Options{})
	waitFor(t, "the busy instance's queue polled", func() bool {
		for _, st := range m.Pools()[0].Instances() {
			if st.ID == addr {
				return st.Engine.Waiting == 12
			}
		}
		return false
	})
}

// By default the metrics are polled for the engine's running limit alone:
// a lasting queue at the most running teaches it, and the reported queue
// itself stays out of the instance's load. With learn_limit false nothing
// is learned.
func TestEngineMetricsLimitOnly(t *testing.T) {
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprintln(w, "vllm:num_requests_waiting{model_name=\"m\"} 12")
			fmt.Fprintln(w, "vllm:num_requests_running{model_name=\"m\"} 16")
		}
	}))
	defer full.Close()
	addr := strings.TrimPrefix(full.URL, "http://")
	state := func(m *testManager) scheduler.InstanceState {
		for _, st := range m.Pools()[0].Instances() {
			if st.ID == addr {
				return st
			}
		}
		return scheduler.InstanceState{}
	}
	m := startManager(t, parseConfig(t, `
pools:
  - instances: [{address: "`+addr+`"}, {address: "`+healthyInstance(t)+`"}]
    metrics: {interval: 100ms}
`), true, Options{})
	waitFor(t, "the running limit learned from the polled queue", func() bool { return state(m).SlotLimit == 16 })
	if st := state(m); st.Slots != 16 || st.Engine != (scheduler.EngineLoad{}) {
		t.Errorf("limit only: slots %d, engine load %+v; want 16 and none", st.Slots, st.Engine)
	}
	off := startManager(t, parseConfig(t, `
pools:
  - instances: [{address: "`+addr+`"}, {address: "`+healthyInstance(t)+`"}]
    metrics: {learn_limit: false, interval: 100ms}
`), true, Options{})
	// Five intervals, more than the two polls a limit needs.
	time.Sleep(500 * time.Millisecond)
	if st := state(off); st.SlotLimit != 0 || st.Slots != 256 {
		t.Errorf("learn_limit false: slot limit %d, slots %d; want 0 and 256", st.SlotLimit, st.Slots)
	}
}

// A queue the limit poller sees for the first time is confirmed by a poll
// made as soon as it can have lasted (scheduler's slotConfirm), not a whole
// interval later; once the limit is learned the poller keeps its interval.
// With an interval of a minute the limit is learned only through that
// early poll.
func TestEngineMetricsLimitConfirmedSoon(t *testing.T) {
	var mu sync.Mutex
	var polls []time.Time
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			mu.Lock()
			polls = append(polls, time.Now())
			mu.Unlock()
			fmt.Fprintln(w, "vllm:num_requests_waiting{model_name=\"m\"} 3")
			fmt.Fprintln(w, "vllm:num_requests_running{model_name=\"m\"} 16")
		}
	}))
	defer full.Close()
	addr := strings.TrimPrefix(full.URL, "http://")
	m := startManager(t, parseConfig(t, `
pools:
  - instances: [{address: "`+addr+`"}]
    metrics: {interval: 1m}
`), true, Options{})
	waitFor(t, "the running limit learned from a queue seen twice", func() bool {
		for _, st := range m.Pools()[0].Instances() {
			if st.ID == addr && st.SlotLimit == 16 {
				return true
			}
		}
		return false
	})
	mu.Lock()
	if len(polls) < 2 || polls[1].Sub(polls[0]) < 250*time.Millisecond {
		t.Errorf("polls at %v: want a second one at least 250ms after the first", polls)
	}
	mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(polls) != 2 {
		t.Errorf("%d polls within a minute's interval, want 2: the first and the one that confirmed the queue", len(polls))
	}
}
