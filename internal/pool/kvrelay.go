package pool

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/state"
)

// relayed returns the target a pool's KV-event subscriber feeds. In bind
// mode over a Redis store it is a state.KVRelay: what this replica hears
// goes to the pool and to the other replicas, and what they hear comes
// back to the pool (engines dial one address, so each replica hears only
// those behind it). In connect mode every replica hears every engine, and
// the memory store is a pool of one: the pool itself, nothing relayed.
// stop ends the relay.
func (s kvSource) relayed(ctx context.Context, sink Sink) (target kvevents.Target, stop func()) {
	p, ok := sink.(*Pool)
	if !ok || s.cfg.Mode != kvevents.Bind {
		return sink, func() {}
	}
	rs, ok := p.store.(*state.RedisStore)
	if !ok {
		return sink, func() {}
	}
	r, err := state.NewKVRelay(rs, sink, state.KVRelayOptions{Known: newMembership(p.Addresses, time.Second).has})
	if err != nil { // cannot happen with these options: subscribe unrelayed rather than not at all
		s.cfg.Log.Error("kv events: relay not started", "pool", s.cfg.Pool, "error", err)
		return sink, func() {}
	}
	s.relays.set(s.cfg.Pool, r)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx) // only errs when run twice
	}()
	return r, func() { cancel(); <-done }
}

// membership answers whether an id is an instance, from a list read at
// most every period. Safe for concurrent use.
type membership struct {
	list   func() []string
	period time.Duration
	mu     sync.Mutex
	at     time.Time
	ids    map[string]struct{}
}

func newMembership(list func() []string, period time.Duration) *membership {
	return &membership{list: list, period: period, ids: map[string]struct{}{}}
}

func (m *membership) has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); now.Sub(m.at) >= m.period {
		m.at = now
		clear(m.ids)
		for _, a := range m.list() {
			m.ids[a] = struct{}{}
		}
	}
	_, ok := m.ids[id]
	return ok
}

// kvRelayMetrics exports the bind-mode relays' counters, read from them
// at each scrape.
type kvRelayMetrics struct {
	ops, delay *prometheus.Desc

	mu     sync.Mutex
	relays map[string]*state.KVRelay // by pool
}

// newKVRelayMetrics registers the relays' series when a pool of cfg
// relays (bind mode over Redis); nil otherwise.
func newKVRelayMetrics(cfg config.Config, reg prometheus.Registerer) *kvRelayMetrics {
	if cfg.State.Backend != "redis" {
		return nil
	}
	relays := false
	for _, pc := range cfg.Pools {
		relays = relays || (pc.KVEvents.Enabled && pc.KVEvents.Mode == kvevents.Bind)
	}
	if !relays {
		return nil
	}
	k := &kvRelayMetrics{
		ops: prometheus.NewDesc("dualmap_kv_relay_operations",
			"Bind-mode KV-event relay (docs/kv-events.md), since the relay started, by what: published (operations this replica heard and wrote to Redis), applied (other replicas' operations applied here), dropped (operations lost to a full buffer or a failed write, replaced by snapshots), snapshots (instance snapshots written), handovers (instances another replica took over).",
			[]string{"pool", "what"}, nil),
		delay: prometheus.NewDesc("dualmap_kv_relay_delay_last_seconds",
			"Delay of the last relayed KV-event entry read: from its write on another replica to its application here.",
			[]string{"pool"}, nil),
		relays: map[string]*state.KVRelay{},
	}
	if reg != nil {
		reg.MustRegister(k)
	}
	return k
}

// set makes r pool's relay (nil-safe).
func (k *kvRelayMetrics) set(pool string, r *state.KVRelay) {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.relays[pool] = r
	k.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (k *kvRelayMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- k.ops; ch <- k.delay }

// Collect implements prometheus.Collector.
func (k *kvRelayMetrics) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for pool, r := range k.relays {
		st := r.Stats()
		for what, n := range map[string]uint64{
			"published": st.Published, "applied": st.Applied, "dropped": st.Dropped,
			"snapshots": st.Snapshots, "handovers": st.Handovers,
		} {
			ch <- prometheus.MustNewConstMetric(k.ops, prometheus.CounterValue, float64(n), pool, what)
		}
		ch <- prometheus.MustNewConstMetric(k.delay, prometheus.GaugeValue, st.DelayLast.Seconds(), pool)
	}
}
