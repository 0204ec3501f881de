package httpengine

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ttftBuckets returns vLLM's buckets for vllm:time_to_first_token_seconds.
func ttftBuckets() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
}

// metrics are the server's Prometheus series, under vLLM's names, each
// labelled model_name (Options.Model) and engine_name (Options.Name).
// Token counts are in tokens; times are simulated seconds (equal to wall
// seconds at TimeScale 1).
type metrics struct {
	ttft    prometheus.Histogram // observed by Run
	handler http.Handler
}

func newMetrics(s *Server) *metrics {
	labels := prometheus.Labels{"model_name": s.opt.Model, "engine_name": s.opt.Name}
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, f func(Snapshot) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(s.Snapshot()) }))
	}
	counter := func(name, help string, f func(Snapshot) float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(s.Snapshot()) }))
	}
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
		func(v Snapshot) float64 { return float64(v.Waiting) })
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
		func(v Snapshot) float64 { return float64(v.Running) })
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
		func(v Snapshot) float64 { return v.CacheUsage })
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
		func(v Snapshot) float64 { return float64(v.Engine.PromptTokens) })
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
		func(v Snapshot) float64 { return float64(v.Engine.CachedTokens) })
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
		func(v Snapshot) float64 { return float64(v.Engine.PromptTokens) })
	counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.",
		func(v Snapshot) float64 { return float64(v.Engine.Preemptions) })
	counter("dualmap_engine_recomputed_tokens_total", "Prompt and output tokens prefilled again after preemptions (simulated engine).",
		func(v Snapshot) float64 { return float64(v.Engine.RecomputedTokens) })
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
		func(v Snapshot) float64 { return float64(v.GenerationTokens) })
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dualmap_engine_prefill_legs_total",
		Help: "Prefill legs of prefill/decode requests served (kv_transfer_params.do_remote_decode).", ConstLabels: labels},
		func() float64 { return float64(s.prefillLegs.Load()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dualmap_engine_kv_received_tokens_total",
		Help: "Prompt tokens whose KV a decode leg received from a prefill instance (kv_transfer_params.do_remote_prefill) instead of computing.", ConstLabels: labels},
		func() float64 { return float64(s.kvReceived.Load()) }))
	m := &metrics{
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds (simulated).",
			ConstLabels: labels, Buckets: ttftBuckets(),
		}),
	}
	reg.MustRegister(m.ttft)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}
