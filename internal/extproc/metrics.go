package extproc

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the router's Prometheus series. Label values never carry
// prompt text.
type metrics struct {
	decisions   *prometheus.CounterVec   // pool, policy, reason
	errors      *prometheus.CounterVec   // kind
	queueWait   *prometheus.HistogramVec // pool
	queueDepth  *prometheus.GaugeVec     // pool
	pending     *prometheus.GaugeVec     // pool, instance
	healthy     *prometheus.GaugeVec     // pool, instance
	promptTok   *prometheus.CounterVec   // pool
	cachedTok   *prometheus.CounterVec   // pool
	tokenize    prometheus.Histogram
	decide      prometheus.Histogram
	firstByte   *prometheus.HistogramVec // pool
	upstreamErr *prometheus.CounterVec   // pool, instance
	hostIgnored *prometheus.CounterVec   // pool
	stateUp     *prometheus.GaugeVec     // pool
	stateDelay  *prometheus.GaugeVec     // pool
	rejections  *prometheus.CounterVec   // limit
	// stateRejected mirrors the store's cumulative counters of what Redis
	// returned and was not used as it was.
	stateRejected *prometheus.GaugeVec // pool, reason

	// Added with tracing (issue 16); see metrics_more.go.
	ttftEstimated *prometheus.HistogramVec // pool, instance
	ttftObserved  *prometheus.HistogramVec // pool, instance
	queued        *prometheus.GaugeVec     // pool, instance
	queuedTok     *prometheus.GaugeVec     // pool, instance
	running       *prometheus.GaugeVec     // pool, instance
	aheadCost     *prometheus.GaugeVec     // pool, instance
	engineFull    *prometheus.GaugeVec     // pool, instance
	migrations    *prometheus.CounterVec   // pool
	shed          *prometheus.CounterVec   // pool, status, reason
	stateErrors   *prometheus.CounterVec   // pool
	stateLag      *prometheus.GaugeVec     // pool
	streamErrors  *prometheus.CounterVec   // phase
	sloMet        *prometheus.CounterVec   // pool, met
	servedReports *prometheus.CounterVec   // pool, source
	usage         *usageMetrics            // engine-reported prefix reuse (usage.go)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_decisions_total", Help: "Routing decisions by pool, policy and reason (cache, load, tie, overflow, only, policy, migrated, rerouted, any).",
		}, []string{"pool", "policy", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_errors_total", Help: "Requests answered with an error, by kind.",
		}, []string{"kind"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dualmap_queue_wait_seconds", Help: "Time requests waited in the router queue before dispatch.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"pool"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dualmap_queue_depth", Help: "Requests waiting in the router queues.",
		}, []string{"pool"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dualmap_instance_pending_tokens", Help: "Prefill tokens queued in the router plus dispatched and not yet through prefill, per instance.",
		}, []string{"pool", "instance"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dualmap_instance_healthy", Help: "1 when the instance takes requests.",
		}, []string{"pool", "instance"}),
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
		upstreamErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dualmap_upstream_errors_total", Help: "5xx responses and connection failures per instance.",
		}, []string{"pool", "instance"}),
	}
	m.hostIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_upstream_host_ignored_total", Help: "Responses whose x-dualmap-upstream-host named no instance of the pool: ignored for health attribution.",
	}, []string{"pool"})
	m.stateUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_state_up", Help: "1 while the shared state (Redis) is reachable; always 1 with in-memory state.",
	}, []string{"pool"})
	m.stateDelay = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_state_propagation_p99_seconds", Help: "p99 delay between another replica's dispatch and its arrival here.",
	}, []string{"pool"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_limit_rejections_total", Help: "Requests refused by a bound on the router's memory, by the limits key: max_streams, max_buffered_bytes, max_buffered_bytes_per_client, max_body_bytes, body_timeout, first_message_timeout, idle_timeout.",
	}, []string{"limit"})
	for _, l := range []string{limitStreams, limitBuffered, limitBody, limitPerClient, limitBodyTimeout, limitFirstMessage, limitIdle} {
		m.rejections.WithLabelValues(l)
	}
	m.stateRejected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_state_rejected", Help: "What the shared state (Redis) returned and this replica did not use as it was, since start, by reason: reply (connection closed at a reply beyond the size limits), malformed, oversized, clamped, ignored (untimed load hashes, heartbeats scored in the future), bad_clock (dispatch batches with absurd timestamps), panic (background rounds recovered).",
	}, []string{"pool", "reason"})
	m.usage = newUsageMetrics(reg)
	if reg != nil {
		reg.MustRegister(m.decisions, m.errors, m.queueWait, m.queueDepth, m.pending, m.healthy,
			m.promptTok, m.cachedTok, m.tokenize, m.decide, m.firstByte, m.upstreamErr, m.hostIgnored, m.stateUp, m.stateDelay, m.rejections)
		reg.MustRegister(m.stateRejected)
	}
	m.addMore(reg)
	return m
}
