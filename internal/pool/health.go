package pool

import (
	"context"
	"net/http"
	"time"
)

// Health has one owner: the pool. Its lock (Pool.mu) guards every
// instance's record and is held while the verdict is told to the
// scheduler, so passive failures (from tickets), active probes (a Source),
// the xDS management server's verdicts and membership changes are applied
// in the order they were decided.
//
// An instance that Envoy cannot reach (the request went to the fallback),
// or that answers 502, 503 or 504, is taken out at once; one that answers
// other 5xx is taken out after health.consecutive_5xx of them in a row (an
// engine under load can fail one request with 500 and serve the next). It
// is kept out for a backoff that doubles on repeated failures
// (health.backoff up to health.max_backoff). Probes take out instances
// that stop answering and bring back those that answer again once their
// backoff has passed. An instance the management server marks UNHEALTHY
// or TIMEOUT stays out until it says otherwise.

// healthState is an instance's passive-failure backoff.
type healthState struct {
	down      bool
	downUntil time.Time
	backoff   time.Duration
	errors    int // other 5xx answers in a row since the last success or outage
}

// HealthState is what the pool holds about an instance's health.
type HealthState struct {
	Down      bool          // taken out by a failure or a probe
	DownUntil time.Time     // the earliest a probe may bring it back
	Backoff   time.Duration // the current backoff (0: none since it served well)
}

// HealthOf returns id's health record (the zero value for an instance with
// none yet).
func (p *Pool) HealthOf(id string) HealthState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.health[id]; h != nil {
		return HealthState{Down: h.down, DownUntil: h.downUntil, Backoff: h.backoff}
	}
	return HealthState{}
}

// healthOf returns id's health state, creating it. Call with p.mu held.
func (p *Pool) healthOf(id string) *healthState {
	h := p.health[id]
	if h == nil {
		h = &healthState{}
		p.health[id] = h
	}
	return h
}

// failed records a connection failure of instance id, or a 5xx that takes
// it out at once. The first failure of an outage takes it out for the
// backoff; failures of requests already in flight during the outage change
// nothing; a failure after the instance came back doubles the backoff
// (flapping escalates).
func (p *Pool) failed(id string) {
	p.m.m.upstreamErr.WithLabelValues(p.name, id).Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.takeOut(id)
}

// answered5xx records a 5xx answer of instance id: 502, 503 and 504 take
// it out at once, other 5xx once health.consecutive_5xx have come in a
// row.
func (p *Pool) answered5xx(id string, status int) {
	p.m.m.upstreamErr.WithLabelValues(p.name, id).Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.healthOf(id)
	if status < 502 || status > 504 {
		if h.errors++; h.errors < p.m.cfg.Health.Consecutive5xx {
			return
		}
	}
	p.takeOut(id)
}

// takeOut takes id out for its backoff, unless it is out already. Call
// with p.mu held.
func (p *Pool) takeOut(id string) {
	m := p.m
	now := m.now()
	h := p.healthOf(id)
	h.errors = 0
	if h.down {
		return
	}
	switch {
	case h.backoff == 0:
		h.backoff = m.cfg.Health.Backoff
	default:
		h.backoff = min(2*h.backoff, m.cfg.Health.MaxBackoff)
	}
	h.down = true
	h.downUntil = now.Add(h.backoff)
	m.log.Warn("instance failed; taken out", "pool", p.name, "instance", id, "backoff", h.backoff)
	p.applyHealth(id)
}

// succeeded records a successful response: once an instance has served
// well for a whole max_backoff since it came back, its backoff resets.
func (p *Pool) succeeded(id string) {
	now := p.m.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.health[id]
	if h == nil {
		return
	}
	h.errors = 0
	if !h.down && now.Sub(h.downUntil) > p.m.cfg.Health.MaxBackoff {
		h.backoff = 0
	}
}

// probed records the answer of an active check (or an engine's own report
// of its health): an instance that does not answer is taken out; one that
// answers comes back once its backoff has passed. The verdict is told to
// the scheduler on every probe, not only on a change: idempotent, and it
// repairs any disagreement.
func (p *Pool) probed(id string, ok bool) {
	now := p.m.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.healthOf(id)
	was := h.down
	switch {
	case !ok && !h.down:
		h.down = true
		h.downUntil = now
	case ok && h.down && !now.Before(h.downUntil):
		h.down = false
	}
	if was != h.down {
		p.m.log.Info("instance health changed", "pool", p.name, "instance", id, "healthy", !h.down)
	}
	p.applyHealth(id)
}

// applyHealth tells the scheduler whether id is up. Call with p.mu held.
func (p *Pool) applyHealth(id string) {
	up := !p.healthOf(id).down && !p.xdsDown(id)
	if err := p.setHealthy(id, up); err != nil { // pd.go: both halves of a P/D pool
		p.m.log.Debug("health change for an instance no longer in the pool", "pool", p.name, "instance", id)
	}
}

// SetHealthy takes id out (or brings it back) at once, as an active check
// that it failed (or answered after its backoff) would. For tests and
// tools that need a pool with instances down.
func (p *Pool) SetHealthy(id string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.healthOf(id)
	h.down = !ok
	if ok {
		h.downUntil = time.Time{}
	} else {
		h.downUntil = p.m.now()
	}
	p.applyHealth(id)
}

// probeSource is the active health check: GET health.path on every
// instance every health.interval; the answer (2xx or not) is the
// instance's health.
type probeSource struct {
	client   *http.Client
	path     string
	interval time.Duration
	timeout  time.Duration
}

func (probeSource) Name() string { return "health" }

func (s probeSource) Run(ctx context.Context, sink Sink) {
	everyInstance(ctx, s.interval, sink, func(id string) time.Duration {
		sink.Health(id, s.probe(ctx, id))
		return 0
	})
}

func (s probeSource) probe(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+s.path, nil)
	if err != nil {
		return false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
