package extproc

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dualmap/dualmap/internal/config"
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
		case contains(waitingNames, name):
			dst = &l.Waiting
		case contains(runningNames, name):
			dst = &l.Running
		case contains(kvNames, name):
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// metricsLoop polls every instance of a pool for its own load.
func (s *Server) metricsLoop(ctx context.Context, p *pool, m config.Metrics) {
	t := time.NewTicker(m.Interval)
	defer t.Stop()
	for {
		for _, id := range p.addresses() {
			if l, ok := s.pollEngine(ctx, id, m.Path); ok {
				p.sched.SetEngineLoad(id, l)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) pollEngine(ctx context.Context, addr, path string) (scheduler.EngineLoad, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Health.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
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
