package kvevents

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the subscribers' Prometheus series, labelled by pool. One
// Metrics serves every pool of a process.
type Metrics struct {
	events     *prometheus.CounterVec   // pool, type
	blocks     *prometheus.CounterVec   // pool, outcome
	batches    *prometheus.CounterVec   // pool
	gaps       *prometheus.CounterVec   // pool
	replays    *prometheus.CounterVec   // pool, result
	restarts   *prometheus.CounterVec   // pool
	decodeErrs *prometheus.CounterVec   // pool
	reconnects *prometheus.CounterVec   // pool
	unknown    *prometheus.CounterVec   // pool
	lag        *prometheus.HistogramVec // pool
	exact      *prometheus.GaugeVec     // pool
	mismatched *prometheus.GaugeVec     // pool
}

// NewMetrics registers the series with reg (nil: none registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"pool"})
	}
	m := &Metrics{
		events:     counter("dualmap_kv_events_total", "KV-cache events decoded from the engines, by type (unknown: skipped).", "pool", "type"),
		blocks:     counter("dualmap_kv_event_blocks_total", "Blocks named by KV-cache events, by outcome: stored, removed (from the index), orphan (parent never seen), unkeyed (LoRA, cache salt, multimodal, other media or groups).", "pool", "outcome"),
		batches:    counter("dualmap_kv_event_batches_total", "KV-event batches received (live and replayed).", "pool"),
		gaps:       counter("dualmap_kv_event_gaps_total", "Sequence gaps in an engine's KV-event stream.", "pool"),
		replays:    counter("dualmap_kv_event_replays_total", "Replay requests after a gap or a late start, by result: ok, failed (the instance falls back to the predicted index), none (no replay endpoint configured).", "pool", "result"),
		restarts:   counter("dualmap_kv_event_restarts_total", "Engine publishers seen restarting (their sequence went back): their blocks are purged.", "pool"),
		decodeErrs: counter("dualmap_kv_event_decode_errors_total", "KV-event messages that could not be decoded (bad frames or payloads).", "pool"),
		reconnects: counter("dualmap_kv_event_reconnects_total", "Subscriber connections to engine publishers lost and re-dialled.", "pool"),
		unknown:    counter("dualmap_kv_event_unknown_topics_total", "Messages on the bound socket whose topic names no instance of the pool.", "pool"),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dualmap_kv_event_lag_seconds",
			Help:    "Delay from an engine's batch timestamp to its application to the index (engine and router clocks).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}}, []string{"pool"}),
		exact:      gauge("dualmap_kv_events_exact_instances", "Instances whose cache index is their engine's report (exact view); the others use the predicted index."),
		mismatched: gauge("dualmap_kv_events_block_size_mismatch_instances", "Instances whose engine's block size differs from the pool's block_size: their events are ignored."),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.blocks, m.batches, m.gaps, m.replays, m.restarts, m.decodeErrs, m.reconnects, m.unknown, m.lag, m.exact, m.mismatched)
	}
	return m
}
