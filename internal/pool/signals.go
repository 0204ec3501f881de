package pool

import (
	"context"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/scheduler"
)

// Engine signals: what a pool's model servers say about themselves, beside
// the router's own accounting of the requests it sent them. A Source
// watches the instances and feeds a Sink; the pool is the sink, so every
// signal lands with the one owner of what it changes: load and cache
// blocks in the scheduler's ledger, health in the pool's health records.
//
// The sources today: the Prometheus poller (enginemetrics.go: queue and KV
// gauges, pools[].metrics), the active health check (health.go, health.*)
// and the KV-events subscriber (kvevents.go, pools[].kv_events). A new
// kind (SGLang's load stream) is one file with its Source and a case in
// Manager.sources for its configuration.

// Source is one engine signal source of a pool.
type Source interface {
	// Name names the source in logs ("engine_metrics", "health").
	Name() string
	// Run feeds sink until ctx ends, then returns (that is how a source
	// stops; it is started by calling Run, once, on a goroutine of its
	// own). A panic in Run is recovered and Run is called again after a
	// backoff. Run may block on I/O; the sink's methods do not.
	Run(ctx context.Context, sink Sink)
}

// Sink is what a Source feeds. Its methods are safe for concurrent use
// and never block on I/O; an id that is no instance of the pool is
// ignored.
type Sink interface {
	// Addresses returns the pool's instances now (they change with
	// membership: a source reads them on every round).
	Addresses() []string
	// Load sets the load instance id reports of itself (waiting and
	// running requests, KV memory in use); Limit takes from such a
	// report only what it shows of the engine's running limit, and says
	// how soon a report of id can teach more of it (0: at the source's
	// own pace).
	Load(id string, l scheduler.EngineLoad)
	Limit(id string, l scheduler.EngineLoad) time.Duration
	// Stored records that id's KV cache holds the prompt with these
	// chained blocks (the engine's own report of a stored prefix).
	Stored(id string, blocks []uint64)
	// Removed records that id's KV cache no longer holds these blocks,
	// Cleared that it holds none (KV events: evictions, restarts).
	Removed(id string, blocks []uint64)
	Cleared(id string)
	// SetExact says whether id's cache index is the engine's own report
	// (a whole KV-event stream) or the router's prediction.
	SetExact(id string, exact bool)
	// Health records whether id reports (or answers) as healthy.
	Health(id string, ok bool)
}

// Load implements Sink.
func (p *Pool) Load(id string, l scheduler.EngineLoad) {
	_ = p.sched.SetEngineLoad(id, l) // an instance that left meanwhile: nothing to set
	if p.pd != nil {
		_ = p.pd.sched.SetEngineLoad(id, l) // a P/D pool's prefill half (pd.go)
	}
}

// Limit implements Sink.
func (p *Pool) Limit(id string, l scheduler.EngineLoad) time.Duration {
	again, _ := p.sched.SetEngineLimit(id, l) // an instance that left meanwhile: nothing to set
	if p.pd != nil {
		if d, _ := p.pd.sched.SetEngineLimit(id, l); d > 0 && (again == 0 || d < again) {
			again = d
		}
	}
	return again
}

// Stored implements Sink.
func (p *Pool) Stored(id string, blocks []uint64) {
	_ = p.sched.AddCached(id, blocks) // an instance that left meanwhile: nothing to record
	if p.pd != nil {
		_ = p.pd.sched.AddCached(id, blocks)
	}
}

// Health implements Sink.
func (p *Pool) Health(id string, ok bool) { p.probed(id, ok) }

// sources are the engine signal sources pool pc's configuration asks for.
func (m *Manager) sources(pc config.Pool) []Source {
	out := []Source{probeSource{client: m.client, path: m.cfg.Health.Path, interval: m.cfg.Health.Interval, timeout: m.cfg.Health.Timeout}}
	if pc.Metrics.On() || pc.Metrics.Limit() {
		out = append(out, promSource{client: m.client, path: pc.Metrics.Path, interval: pc.Metrics.Interval, timeout: m.cfg.Health.Timeout,
			limitOnly: !pc.Metrics.On()})
	}
	if pc.KVEvents.Enabled {
		out = append(out, m.kvSource(pc))
	}
	return out
}

var _ Sink = (*Pool)(nil)

// everyInstance calls f for each of sink's instances at once and then
// every interval, until ctx ends: the loop of a polling source. A call of
// f that returns a positive duration asks for the next round that soon
// after the round ends, if that is sooner.
func everyInstance(ctx context.Context, interval time.Duration, sink Sink, f func(id string) time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		start := time.Now()
		soon := time.Duration(0)
		for _, id := range sink.Addresses() {
			if d := f(id); d > 0 && (soon == 0 || d < soon) {
				soon = d
			}
		}
		wait := max(interval-time.Since(start), 0)
		if soon > 0 && soon < wait {
			wait = soon
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
