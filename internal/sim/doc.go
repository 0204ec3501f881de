// Package sim is the trace-driven cluster simulator behind `dualmap sim`.
//
// It replays a request trace through the very scheduler package the
// ext_proc server uses (one or several replicas of it, with the clock
// injected) in front of a model of each serving instance (package
// sim/engine: vLLM-like continuous batching, chunked prefill and a two-tier
// LRU prefix cache whose hit is decided when a request's prefill starts),
// and measures what users size a router by: SLO attainment, TTFT and E2E
// latency, cache hit rate, load balance and migrations, per policy, queue
// mode and request rate.
//
// It is deterministic for a given trace, options and seed. It is not a
// performance model of the router itself (routing takes no simulated time).
package sim
