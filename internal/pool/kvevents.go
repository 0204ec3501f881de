package pool

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/kvevents"
)

// kvSource subscribes to a pool's KV-cache events (internal/kvevents):
// what the engines store and evict, in the router's own block keys, goes
// to the scheduler's cache index, which is exact while an instance's
// stream is whole.
type kvSource struct {
	cfg    kvevents.Config
	relays *kvRelayMetrics // nil: no relay's series
}

func (m *Manager) kvSource(pc config.Pool) kvSource {
	c := pc.KVEventsConfig()
	c.Log, c.Metrics, c.Now = m.log, m.kv, m.now
	return kvSource{cfg: c, relays: m.kvRelays}
}

// newKVMetrics registers the subscriptions' series when a pool of cfg
// subscribes.
func newKVMetrics(cfg config.Config, reg prometheus.Registerer) *kvevents.Metrics {
	for _, pc := range cfg.Pools {
		if pc.KVEvents.Enabled {
			return kvevents.NewMetrics(reg)
		}
	}
	return nil
}

func (s kvSource) Name() string { return "kv_events" }

// Run subscribes until ctx ends. A subscription that cannot start (bind
// mode's address in use) is logged and retried. In bind mode over Redis
// what it hears is relayed to the other replicas (kvrelay.go).
func (s kvSource) Run(ctx context.Context, sink Sink) {
	target, stop := s.relayed(ctx, sink)
	defer stop()
	wait := time.Second
	for ctx.Err() == nil {
		sub, err := kvevents.New(s.cfg)
		if err == nil {
			err = sub.Run(ctx, sink.Addresses, target)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		s.cfg.Log.Error("kv events: subscription failed, retrying", "pool", s.cfg.Pool, "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// Removed implements Sink.
func (p *Pool) Removed(id string, blocks []uint64) {
	_ = p.sched.RemoveCached(id, blocks) // an instance that left meanwhile: nothing to remove
	if p.pd != nil {
		_ = p.pd.sched.RemoveCached(id, blocks) // a P/D pool's prefill half (pd.go)
	}
}

// Cleared implements Sink.
func (p *Pool) Cleared(id string) {
	_ = p.sched.ClearCached(id)
	if p.pd != nil {
		_ = p.pd.sched.ClearCached(id)
	}
}

// SetExact implements Sink.
func (p *Pool) SetExact(id string, exact bool) {
	_ = p.sched.SetExact(id, exact)
	if p.pd != nil {
		_ = p.pd.sched.SetExact(id, exact)
	}
}

var _ kvevents.Target = (*Pool)(nil)
