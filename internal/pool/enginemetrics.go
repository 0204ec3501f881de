package pool

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Engine metrics: the queue gauges model servers publish, summed over label
// sets (several models or data-parallel ranks on one endpoint).
var (
	waitingNames = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"}
	runningNames = []string{"vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"}
	// KV memory in use as a fraction: vLLM's gauge (gpu_cache_usage_perc
	// before v0.10) and SGLang's token usage. The highest label set wins:
	// the fullest rank is the one that stops admitting.
	kvNames = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}
)

// parseEngineMetrics reads Prometheus text exposition and returns the
// waiting and running requests and the KV memory use it reports, and
// whether it found any of them.
func parseEngineMetrics(r io.Reader) (scheduler.EngineLoad, bool) {
	var l scheduler.EngineLoad
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		var dst *int
		kv := false
		switch {
		case slices.Contains(waitingNames, name):
			dst = &l.Waiting
		case slices.Contains(runningNames, name):
			dst = &l.Running
		case slices.Contains(kvNames, name):
			kv = true
		default:
			continue
		}
		if j := strings.LastIndexByte(rest, '}'); j >= 0 {
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || v < 0 || v > 1e9 {
			continue
		}
		if kv {
			if v <= 1 {
				l.KVUsage = max(l.KVUsage, v)
				found = true
			}
			continue
		}
		*dst += int(v)
		found = true
	}
	return l, found
}

// promSource polls every instance's Prometheus exposition (pools[].metrics:
// path, interval) for the load it reports of itself, or, with limitOnly,
// for what that load shows of its running limit (pools[].metrics.enabled
// false, learn_limit true).
type promSource struct {
	client    *http.Client
	path      string
	interval  time.Duration
	timeout   time.Duration
	limitOnly bool
}

func (promSource) Name() string { return "engine_metrics" }

func (s promSource) Run(ctx context.Context, sink Sink) {
	everyInstance(ctx, s.interval, sink, func(id string) time.Duration {
		l, ok := s.poll(ctx, id)
		switch {
		case !ok:
		case s.limitOnly:
			return sink.Limit(id, l)
		default:
			sink.Load(id, l)
		}
		return 0
	})
}

func (s promSource) poll(ctx context.Context, addr string) (scheduler.EngineLoad, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+s.path, nil)
	if err != nil {
		return scheduler.EngineLoad{}, false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return scheduler.EngineLoad{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scheduler.EngineLoad{}, false
	}
	return parseEngineMetrics(io.LimitReader(resp.Body, 8<<20))
}

var _ Source = promSource{}
