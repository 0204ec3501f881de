package pool

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pools' Prometheus series: their shared state, their
// queues and instances, and what the pools decide about health. Label
// values never carry prompt text; pools and instances come from the
// configuration (or its DNS name, or xDS).
type metrics struct {
	queueDepth  *prometheus.GaugeVec   // pool
	pending     *prometheus.GaugeVec   // pool, instance
	healthy     *prometheus.GaugeVec   // pool, instance
	queued      *prometheus.GaugeVec   // pool, instance
	queuedTok   *prometheus.GaugeVec   // pool, instance
	running     *prometheus.GaugeVec   // pool, instance
	aheadCost   *prometheus.GaugeVec   // pool, instance
	engineFull  *prometheus.GaugeVec   // pool, instance
	upstreamErr *prometheus.CounterVec // pool, instance
	hostIgnored *prometheus.CounterVec // pool
	migrations  *prometheus.CounterVec // pool
	stateUp     *prometheus.GaugeVec   // pool
	stateDelay  *prometheus.GaugeVec   // pool
	stateLag    *prometheus.GaugeVec   // pool
	stateErrors *prometheus.CounterVec // pool
	// stateRejected mirrors the store's cumulative counters of what Redis
	// returned and was not used as it was.
	stateRejected *prometheus.GaugeVec // pool, reason
	// chatTemplate is 1 for the rendering a pool's chats get: "model"
	// (the model's chat template) or "builtin"; renderErrors counts chats
	// the model's template refused.
	chatTemplate *prometheus.GaugeVec   // pool, rendering
	renderErrors *prometheus.CounterVec // pool
	// remoteClamped mirrors the coordinator's counts of other replicas'
	// load records cut to what the instances can hold (at most 32
	// replicas by name, then "other"; "(sum)" for the sum of them).
	remoteClamped *prometheus.GaugeVec // pool, replica
}

func newMetrics(reg prometheus.Registerer) *metrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &metrics{
		queueDepth: gauge("dualmap_queue_depth", "Requests waiting in the router queues.", "pool"),
		pending: gauge("dualmap_instance_pending_tokens", "Prefill tokens queued in the router plus dispatched and not yet through prefill, per instance.",
			"pool", "instance"),
		healthy:   gauge("dualmap_instance_healthy", "1 when the instance takes requests.", "pool", "instance"),
		queued:    gauge("dualmap_instance_queued_requests", "Requests waiting in the router queue of the instance.", "pool", "instance"),
		queuedTok: gauge("dualmap_instance_queued_tokens", "Estimated uncached prompt tokens of the requests waiting in the router queue of the instance.", "pool", "instance"),
		running:   gauge("dualmap_instance_running_requests", "Requests dispatched to the instance and not completed.", "pool", "instance"),
		aheadCost: gauge("dualmap_instance_ahead_cost_seconds", "The learned marginal time to first token of one uncached prompt token of prefill work ahead on the instance (the adaptive router-queue rule's cost; near 0 on an engine that prefills in parallel).",
			"pool", "instance"),
		engineFull: gauge("dualmap_instance_engine_full", "1 when the instance's engine, as far as this replica can tell, queues requests at its running limit: the adaptive rule holds new ones in the router.",
			"pool", "instance"),
		upstreamErr: counter("dualmap_upstream_errors_total", "5xx responses and connection failures per instance.", "pool", "instance"),
		hostIgnored: counter("dualmap_upstream_host_ignored_total", "Responses whose x-dualmap-upstream-host named no instance of the pool: ignored for health attribution.", "pool"),
		migrations:  counter("dualmap_migrations_total", "Queued requests moved to another candidate by the rebalancer: off a hotspot, or, once late, to the candidate holding a longer cached prefix.", "pool"),
		stateUp:     gauge("dualmap_state_up", "1 while the shared state (Redis) is reachable; always 1 with in-memory state.", "pool"),
		stateDelay:  gauge("dualmap_state_propagation_p99_seconds", "p99 delay between another replica's dispatch and its arrival here.", "pool"),
		stateLag:    gauge("dualmap_state_propagation_last_seconds", "Delay between another replica's dispatch and its arrival here, for the last batch read.", "pool"),
		stateErrors: counter("dualmap_state_errors_total", "Failed shared-state (Redis) operations, malformed entries and values included.", "pool"),
		stateRejected: gauge("dualmap_state_rejected", "What the shared state (Redis) returned and this replica did not use as it was, since start, by reason: reply (connection closed at a reply beyond the size limits), malformed, oversized, clamped, ignored (untimed load hashes, heartbeats scored in the future), bad_clock (dispatch batches with absurd timestamps), panic (background rounds recovered), unsigned (with state.redis.record_key_file: replica load records that did not open under the keys).",
			"pool", "reason"),
		chatTemplate: gauge("dualmap_chat_template", "1 for how the pool renders chats before tokenizing them: rendering=\"model\", the model's own chat template (as the engine renders), or \"builtin\", the router's approximate rendering (no template found, or chat_template: builtin).",
			"pool", "rendering"),
		renderErrors: counter("dualmap_chat_template_errors_total", "Chat requests the model's chat template could not render (answered 400).", "pool"),
		remoteClamped: gauge("dualmap_remote_load_clamped", "Other replicas' load records cut, since start, to what the instances can hold before they counted (an instance's running limit and KV capacity), by replica (at most 32 by name, then other; (sum) for heartbeats whose sum over replicas was cut).",
			"pool", "replica"),
	}
	if reg != nil {
		reg.MustRegister(m.queueDepth, m.pending, m.healthy, m.queued, m.queuedTok, m.running, m.aheadCost, m.engineFull, m.upstreamErr,
			m.hostIgnored, m.migrations, m.stateUp, m.stateDelay, m.stateLag, m.stateErrors, m.stateRejected,
			m.chatTemplate, m.renderErrors, m.remoteClamped)
	}
	return m
}

// initPool creates a pool's series, so that they exist (at zero) before
// the first event: dashboards and alerts see them on a fresh server.
func (m *metrics) initPool(name string) {
	m.migrations.WithLabelValues(name)
	m.stateErrors.WithLabelValues(name)
	m.stateLag.WithLabelValues(name)
	m.queueDepth.WithLabelValues(name)
	m.renderErrors.WithLabelValues(name)
}

// UpdateGauges sets the pools' gauges from their schedulers and stores
// (the background loop does every tenth tick; tests call it to read them
// at once).
func (m *Manager) UpdateGauges() {
	m.gaugeMu.Lock()
	defer m.gaugeMu.Unlock()
	if m.seriesOf == nil {
		m.seriesOf = map[string]map[string]bool{}
	}
	for _, p := range m.pools {
		st := p.store.Stats()
		up := 0.0
		if st.Up {
			up = 1
		}
		m.m.stateUp.WithLabelValues(p.name).Set(up)
		m.m.stateDelay.WithLabelValues(p.name).Set(st.PropagationP99.Seconds())
		m.m.stateLag.WithLabelValues(p.name).Set(st.PropagationLast.Seconds())
		advance(m.m.stateErrors.WithLabelValues(p.name), &p.counted.stateErrors, st.Errors)
		advance(m.m.migrations.WithLabelValues(p.name), &p.counted.migrations, p.sched.Stats().Migrations)
		for reason, n := range map[string]uint64{
			"reply": st.RefusedReplies, "malformed": st.Malformed, "oversized": st.Oversized,
			"clamped": st.Clamped, "ignored": st.Ignored, "bad_clock": st.BadClock, "panic": st.Panics, "unsigned": st.Unsigned,
		} {
			m.m.stateRejected.WithLabelValues(p.name, reason).Set(float64(n))
		}
		cs := p.coord.Stats()
		for replica, n := range cs.ClampedBy {
			m.m.remoteClamped.WithLabelValues(p.name, replica).Set(float64(n))
		}
		if cs.ClampedSums > 0 {
			m.m.remoteClamped.WithLabelValues(p.name, "(sum)").Set(float64(cs.ClampedSums))
		}
		m.m.queueDepth.WithLabelValues(p.name).Set(float64(p.sched.QueueLen()))
		members := p.gaugeMembers() // pd.go: a P/D pool's prefill-only instances too
		ids := make([]string, len(members))
		for i, st := range members {
			ids[i] = st.ID
		}
		m.seriesOf[p.name] = m.forgetGone(p.name, m.seriesOf[p.name], ids)
		for _, st := range members {
			m.m.pending.WithLabelValues(p.name, st.ID).Set(float64(st.QueuedTokens + st.PendingTokens))
			m.m.queued.WithLabelValues(p.name, st.ID).Set(float64(st.Queued))
			m.m.queuedTok.WithLabelValues(p.name, st.ID).Set(float64(st.QueuedTokens))
			m.m.running.WithLabelValues(p.name, st.ID).Set(float64(st.Running))
			m.m.aheadCost.WithLabelValues(p.name, st.ID).Set(st.AheadCost)
			full := 0.0
			if st.EngineQueuing {
				full = 1
			}
			m.m.engineFull.WithLabelValues(p.name, st.ID).Set(full)
			h := 0.0
			if st.Healthy && !st.Draining {
				h = 1
			}
			m.m.healthy.WithLabelValues(p.name, st.ID).Set(h)
		}
	}
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
