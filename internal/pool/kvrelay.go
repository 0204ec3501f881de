package pool

import (
	"context"
	"sync"
	"time"

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
