package extproc

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/scheduler"
)

// membership is what the health code (passive and active checks, DNS,
// reloads) needs from a pool's scheduler. Calls that change it run one at a
// time (Server.background); Instances may run concurrently with them.
type membership interface {
	SetHealthy(id string, healthy bool) error
	SetInstances(list []scheduler.Instance) error
	Instances() []scheduler.InstanceState
}

// Health: an instance that answers 5xx (or that Envoy cannot reach) is
// taken out at once and kept out for a backoff that doubles on repeated
// failures (Health.Backoff up to Health.MaxBackoff). Active checks (GET
// Health.Path every Health.Interval) take out instances that stop
// answering and bring back those that answer again once their backoff
// has passed.

// upstreamFailed records a 5xx or connection failure of instance id. The
// first failure of an outage takes it out for the backoff; failures of
// requests already in flight during the outage change nothing; a failure
// after the instance came back doubles the backoff (flapping escalates).
func (s *Server) upstreamFailed(p *pool, id string) {
	s.m.upstreamErr.WithLabelValues(p.name, id).Inc()
	now := s.now()
	p.mu.Lock()
	h := p.healthOf(id)
	if h.down {
		p.mu.Unlock()
		return
	}
	switch {
	case h.backoff == 0:
		h.backoff = s.cfg.Health.Backoff
	default:
		h.backoff = min(2*h.backoff, s.cfg.Health.MaxBackoff)
	}
	h.down = true
	h.downUntil = now.Add(h.backoff)
	backoff := h.backoff
	p.mu.Unlock()
	s.log.Warn("instance failed; taken out", "pool", p.name, "instance", id, "backoff", backoff)
	s.applyHealth(p, id)
}

// upstreamOK records a successful response: once an instance has served
// well for a whole MaxBackoff since it came back, its backoff resets.
func (s *Server) upstreamOK(p *pool, id string) {
	now := s.now()
	p.mu.Lock()
	if h := p.health[id]; h != nil && !h.down && now.Sub(h.downUntil) > s.cfg.Health.MaxBackoff {
		h.backoff = 0
	}
	p.mu.Unlock()
}

// applyHealth tells the scheduler whether id is up, reading the state under
// the pool's lock inside the background call, so a decision taken earlier
// by another goroutine can never overwrite a later one.
func (s *Server) applyHealth(p *pool, id string) {
	s.background(func() {
		p.mu.Lock()
		up := !p.healthOf(id).down && !p.xdsDown(id)
		p.mu.Unlock()
		if err := p.members.SetHealthy(id, up); err != nil {
			s.log.Debug("health change for an instance no longer in the pool", "pool", p.name, "instance", id)
		}
	})
}

func (s *Server) healthLoop(ctx context.Context, p *pool) {
	t := time.NewTicker(s.cfg.Health.Interval)
	defer t.Stop()
	s.checkAll(ctx, p)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.checkAll(ctx, p)
		}
	}
}

func (s *Server) checkAll(ctx context.Context, p *pool) {
	for _, id := range p.addresses() {
		ok := s.probe(ctx, id)
		now := s.now()
		p.mu.Lock()
		h := p.healthOf(id)
		was := h.down
		switch {
		case !ok && !h.down:
			h.down = true
			h.downUntil = now
		case ok && h.down && !now.Before(h.downUntil):
			h.down = false
		}
		changed, healthy := was != h.down, !h.down
		p.mu.Unlock()
		if changed {
			s.log.Info("instance health changed", "pool", p.name, "instance", id, "healthy", healthy)
		}
		// Applied on every probe, not only on a change: idempotent, and it
		// repairs any disagreement with the scheduler.
		s.applyHealth(p, id)
	}
}

func (s *Server) probe(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Health.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+s.cfg.Health.Path, nil)
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

// dnsLoop re-resolves a pool's DNS name and applies membership changes.
func (s *Server) dnsLoop(ctx context.Context, p *pool, d config.DNS) {
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	var last []string
	for {
		ips, err := net.DefaultResolver.LookupHost(ctx, d.Name)
		if err != nil {
			s.log.Warn("dns lookup failed; keeping the last instances", "pool", p.name, "name", d.Name, "error", err)
		} else {
			addrs := make([]string, len(ips))
			for i, ip := range ips {
				addrs[i] = net.JoinHostPort(ip, strconv.Itoa(d.Port))
			}
			slices.Sort(addrs)
			if !slices.Equal(addrs, last) {
				last = addrs
				s.background(func() {
					if err := p.setMembers(nil, &addrs); err != nil {
						s.log.Error("applying dns instances", "pool", p.name, "error", err)
					}
				})
				s.log.Info("pool instances from dns", "pool", p.name, "count", len(addrs))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reload applies the instance lists of a new configuration (pools matched
// by name; other changes need a restart). Streams in flight continue.
func (s *Server) Reload(c config.Config) {
	for _, pc := range c.Pools {
		for _, p := range s.pools {
			if p.name != pc.Name {
				continue
			}
			s.background(func() {
				if err := p.setMembers(&pc.Instances, nil); err != nil {
					s.log.Error("reload", "pool", p.name, "error", err)
				}
			})
		}
	}
}

var _ membership = (*scheduler.Scheduler)(nil)
