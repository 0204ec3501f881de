package extproc

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// addMore makes and registers the decision metrics added with tracing:
// estimated against observed TTFT per instance, the router's per-instance
// load split, migrations, shed requests, shared-state errors and lag, and
// stream errors by phase. Every label is bounded: pools and instances come
// from the configuration (or its DNS name), status and reason from the
// router's own error kinds, phase from the stream's phases.
func (m *metrics) addMore(reg prometheus.Registerer) {
	ttftBuckets := prometheus.ExponentialBuckets(0.005, 2, 14) // 5ms .. 41s
	m.ttftEstimated = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dualmap_ttft_estimated_seconds", Help: "The router's estimate of time to first token on the chosen instance, at the decision.",
		Buckets: ttftBuckets,
	}, []string{"pool", "instance"})
	m.ttftObserved = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dualmap_ttft_observed_seconds", Help: "Observed time from dispatch to the first token (the first response body chunk of a stream, or the response headers when the body is not streamed to the router), per instance.",
		Buckets: ttftBuckets,
	}, []string{"pool", "instance"})
	m.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_instance_queued_requests", Help: "Requests waiting in the router queue of the instance.",
	}, []string{"pool", "instance"})
	m.queuedTok = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_instance_queued_tokens", Help: "Estimated uncached prompt tokens of the requests waiting in the router queue of the instance.",
	}, []string{"pool", "instance"})
	m.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_instance_running_requests", Help: "Requests dispatched to the instance and not completed.",
	}, []string{"pool", "instance"})
	m.aheadCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_instance_ahead_cost_seconds", Help: "The learned marginal time to first token of one uncached prompt token of prefill work ahead on the instance (the adaptive router-queue rule's cost; near 0 on an engine that prefills in parallel).",
	}, []string{"pool", "instance"})
	m.engineFull = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_instance_engine_full", Help: "1 when the instance's engine, as far as this replica can tell, queues requests at its running limit: the adaptive rule holds new ones in the router.",
	}, []string{"pool", "instance"})
	m.migrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_migrations_total", Help: "Queued requests moved to another candidate by the hotspot rebalancer.",
	}, []string{"pool"})
	m.shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_shed_total", Help: "Requests the scheduler did not dispatch, by HTTP status answered and reason (no_endpoint, queue_timeout, late, internal).",
	}, []string{"pool", "status", "reason"})
	m.stateErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_state_errors_total", Help: "Failed shared-state (Redis) operations, malformed entries and values included.",
	}, []string{"pool"})
	m.stateLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dualmap_state_propagation_last_seconds", Help: "Delay between another replica's dispatch and its arrival here, for the last batch read.",
	}, []string{"pool"})
	m.streamErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_stream_errors_total", Help: "ext_proc streams ended by a message out of phase or unknown, by the phase that refused it.",
	}, []string{"phase"})
	m.sloMet = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_slo_requests_total", Help: "Requests whose first token was seen, by whether the observed TTFT met the request's SLO (met=\"true\" or \"false\").",
	}, []string{"pool", "met"})
	m.servedReports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dualmap_served_reports_total", Help: "Upstream responses to dispatched requests, by where the router learnt the endpoint that served: metadata (the proxy's envoy.lb x-gateway-destination-endpoint-served), header (the route's x-dualmap-upstream-host) or none (taken to be the endpoint picked).",
	}, []string{"pool", "source"})
	for _, p := range phaseNames {
		m.streamErrors.WithLabelValues(p)
	}
	for _, k := range []string{"bad_request", "model_not_found", "no_endpoint", "queue_timeout", "late", "tokenize", "internal", "protocol_violation"} {
		m.errors.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.ttftEstimated, m.ttftObserved, m.queued, m.queuedTok, m.running, m.aheadCost, m.engineFull, m.migrations,
			m.shed, m.stateErrors, m.stateLag, m.streamErrors, m.sloMet, m.servedReports)
	}
}

// initPool creates a pool's series, so that they exist (at zero) before
// the first event: dashboards and alerts see them on a fresh server.
func (m *metrics) initPool(name string) {
	m.migrations.WithLabelValues(name)
	for _, src := range []string{servedFromMetadata, servedFromHeader, servedFromNone} {
		m.servedReports.WithLabelValues(name, src)
	}
	m.stateErrors.WithLabelValues(name)
	m.stateLag.WithLabelValues(name)
	m.queueWait.WithLabelValues(name)
	m.queueDepth.WithLabelValues(name)
	m.firstByte.WithLabelValues(name)
	m.promptTok.WithLabelValues(name)
	m.cachedTok.WithLabelValues(name)
	m.sloMet.WithLabelValues(name, "true")
	m.sloMet.WithLabelValues(name, "false")
	for _, s := range []struct{ status, reason string }{{"503", "no_endpoint"}, {"429", "queue_timeout"}, {"503", "late"}} {
		m.shed.WithLabelValues(name, s.status, s.reason)
	}
}

// observeShed counts a request the scheduler shed (err from EnqueueAndWait;
// a client that left while it waited is no shedding).
func (m *metrics) observeShed(pool string, err error) {
	if err == nil {
		return
	}
	e := classify(err, time.Second)
	m.shed.WithLabelValues(pool, strconv.Itoa(e.status), e.kind).Inc()
}

// observeDecision records a dispatched request's estimated TTFT.
func (st *stream) observeDecision() {
	st.s.m.ttftEstimated.WithLabelValues(st.pool.name, st.dec.Instance).Observe(st.dec.EstimatedTTFT.Seconds())
}

// observeFirstToken records the observed TTFT of the stream's request,
// and whether it met its SLO.
func (st *stream) observeFirstToken() {
	d := time.Since(st.dispatched)
	st.s.m.ttftObserved.WithLabelValues(st.pool.name, st.dec.Instance).Observe(d.Seconds())
	slo := st.req.SLO
	if slo == 0 {
		slo = st.s.cfg.SLO.Default
	}
	st.s.m.sloMet.WithLabelValues(st.pool.name, strconv.FormatBool(d+st.dec.Waited <= slo)).Inc()
}

// poolCounters are the last cumulative figures a pool's counters were
// advanced to (the scheduler and the store keep cumulative counts).
type poolCounters struct {
	migrations, stateErrors uint64
}

// advance adds to c what grew since last.
func advance(c prometheus.Counter, last *uint64, now uint64) {
	if now > *last {
		c.Add(float64(now - *last))
	}
	*last = now
}
