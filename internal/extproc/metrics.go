package extproc

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the protocol's Prometheus series: what happened to each
// request (decisions, errors, shedding, timings, TTFT against the SLO,
// engine-reported reuse) and to each stream. The pools' own series (queues,
// instances, health, shared state) are package pool's. Label values never
// carry prompt text; every label is bounded: pools from the configuration,
// instances from the pools, kinds, statuses and reasons from the router's
// own, phases from the stream's.
type metrics struct {
	decisions     *prometheus.CounterVec   // pool, policy, reason
	errors        *prometheus.CounterVec   // kind
	queueWait     *prometheus.HistogramVec // pool
	promptTok     *prometheus.CounterVec   // pool
	cachedTok     *prometheus.CounterVec   // pool
	tokenize      prometheus.Histogram
	decide        prometheus.Histogram
	firstByte     *prometheus.HistogramVec // pool
	rejections    *prometheus.CounterVec   // limit
	ttftEstimated *prometheus.HistogramVec // pool, instance
	ttftObserved  *prometheus.HistogramVec // pool, instance
	shed          *prometheus.CounterVec   // pool, status, reason
	streamErrors  *prometheus.CounterVec   // phase
	sloMet        *prometheus.CounterVec   // pool, met
	servedReports *prometheus.CounterVec   // pool, source
	usage         *usageMetrics            // engine-reported prefix reuse (usage.go)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	ttftBuckets := prometheus.ExponentialBuckets(0.005, 2, 14) // 5ms .. 41s
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_decisions_total", Help: "Routing decisions by pool, policy and reason (cache, load, tie, overflow, holder, slot, only, policy, migrated, rerouted, any).",
		}, []string{"pool", "policy", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_errors_total", Help: "Requests answered with an error, by kind.",
		}, []string{"kind"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dualmap_queue_wait_seconds", Help: "Time requests waited in the router queue before dispatch.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"pool"}),
		promptTok: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_prompt_tokens_total", Help: "Prompt tokens routed.",
		}, []string{"pool"}),
		cachedTok: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_cached_tokens_total", Help: "Prompt tokens the router expected the chosen instance to hold in its KV cache.",
		}, []string{"pool"}),
		tokenize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dualmap_tokenize_seconds", Help: "Time to parse and tokenize a request body.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2.5, 14),
		}),
		decide: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dualmap_decision_seconds", Help: "Time of the scheduler's routing decision.",
			Buckets: prometheus.ExponentialBuckets(0.000001, 2.5, 14),
		}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dualmap_first_byte_seconds", Help: "Time from the router's decision to the upstream's response headers (TTFT for streams).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"pool"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_limit_rejections_total", Help: "Requests refused by a bound on the router's memory, by the limits key: max_streams, max_buffered_bytes, max_buffered_bytes_per_client, max_body_bytes, body_timeout.",
		}, []string{"limit"}),
		ttftEstimated: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dualmap_ttft_estimated_seconds", Help: "The router's estimate of time to first token on the chosen instance, at the decision.",
			Buckets: ttftBuckets,
		}, []string{"pool", "instance"}),
		ttftObserved: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dualmap_ttft_observed_seconds", Help: "Observed time from dispatch to the first token (the first response body chunk of a stream, or the response headers when the body is not streamed to the router), per instance.",
			Buckets: ttftBuckets,
		}, []string{"pool", "instance"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_shed_total", Help: "Requests the scheduler did not dispatch, by HTTP status answered and reason (no_endpoint, queue_timeout, late, internal).",
		}, []string{"pool", "status", "reason"}),
		streamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_stream_errors_total", Help: "ext_proc streams ended by a message out of phase or unknown, by the phase that refused it.",
		}, []string{"phase"}),
		sloMet: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_slo_requests_total", Help: "Requests whose first token was seen, by whether the observed TTFT met the request's SLO (met=\"true\" or \"false\").",
		}, []string{"pool", "met"}),
		servedReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_served_reports_total", Help: "Upstream responses to dispatched requests, by where the router learnt the endpoint that served: metadata (the proxy's envoy.lb x-gateway-destination-endpoint-served), header (the route's x-dualmap-upstream-host) or none (taken to be the endpoint picked).",
		}, []string{"pool", "source"}),
	}
	for _, l := range []string{limitStreams, limitBuffered, limitBody, limitPerClient, limitBodyTimeout, limitFirstMessage, limitIdle} {
		m.rejections.WithLabelValues(l)
	}
	for _, p := range phaseNames {
		m.streamErrors.WithLabelValues(p)
	}
	for _, k := range []string{"bad_request", "model_not_found", "no_endpoint", "queue_timeout", "late", "tokenize", "internal", "protocol_violation"} {
		m.errors.WithLabelValues(k)
	}
	m.usage = newUsageMetrics(reg)
	if reg != nil {
		reg.MustRegister(m.decisions, m.errors, m.queueWait, m.promptTok, m.cachedTok, m.tokenize, m.decide, m.firstByte,
			m.rejections, m.ttftEstimated, m.ttftObserved, m.shed, m.streamErrors, m.sloMet, m.servedReports)
	}
	return m
}

// initPool creates a pool's series, so that they exist (at zero) before
// the first event: dashboards and alerts see them on a fresh server.
func (m *metrics) initPool(name string) {
	for _, src := range []string{servedFromMetadata, servedFromHeader, servedFromNone} {
		m.servedReports.WithLabelValues(name, src)
	}
	m.queueWait.WithLabelValues(name)
	m.firstByte.WithLabelValues(name)
	m.promptTok.WithLabelValues(name)
	m.cachedTok.WithLabelValues(name)
	m.sloMet.WithLabelValues(name, "true")
	m.sloMet.WithLabelValues(name, "false")
	for _, s := range []struct{ status, reason string }{{"503", "no_endpoint"}, {"429", "queue_timeout"}, {"503", "late"}} {
		m.shed.WithLabelValues(name, s.status, s.reason)
	}
}

// forget deletes the protocol's series of an instance that left its pool
// (pool.Manager.OnGone): its TTFT histograms and usage counters.
func (m *metrics) forget(pool, id string) {
	for _, v := range []*prometheus.MetricVec{
		m.ttftEstimated.MetricVec, m.ttftObserved.MetricVec,
		m.usage.reports.MetricVec, m.usage.reported.MetricVec, m.usage.predicted.MetricVec, m.usage.missed.MetricVec,
	} {
		v.DeleteLabelValues(pool, id)
	}
}
