package pool

import (
	"context"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/scheduler"
)

// Membership: a pool's instances are its static list (the configuration,
// replaced by Reload), the addresses its DNS name resolves to, and the
// endpoints its xDS management server assigns (xds.go). Every change goes
// through setMembers under the pool's lock: queued requests of removed
// instances are re-routed, requests in flight are unaffected, and a
// removed instance that comes back starts with a fresh health record.

// instances merges the static list with resolved addresses.
func instances(static []config.Instance, resolved []string) []scheduler.Instance {
	list := make([]scheduler.Instance, 0, len(static)+len(resolved))
	seen := map[string]bool{}
	for _, in := range static {
		list = append(list, scheduler.Instance{ID: in.Address, Weight: in.Weight, CacheTokens: in.CacheTokens})
		seen[in.Address] = true
	}
	for _, a := range resolved {
		if !seen[a] {
			list = append(list, scheduler.Instance{ID: a})
			seen[a] = true
		}
	}
	return list
}

// setMembers replaces the pool's static list or resolved addresses (a nil
// pointer keeps that part as it was) and tells the scheduler.
func (p *Pool) setMembers(static *[]config.Instance, resolved *[]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if static != nil {
		p.static = *static
	}
	if resolved != nil {
		p.dns = *resolved
	}
	return p.applyMembers()
}

// applyMembers tells the scheduler the pool's instances from all sources
// and forgets the health of those that left. Call with p.mu held.
func (p *Pool) applyMembers() error {
	list := withXDS(instances(p.static, p.dns), p.eds)
	keep := make(map[string]bool, len(list))
	for _, in := range list {
		keep[in.ID] = true
	}
	for id := range p.health { // a removed instance that comes back starts afresh
		if !keep[id] {
			delete(p.health, id)
		}
	}
	return p.setInstances(list) // pd.go: by role in a P/D pool
}

// Member reports whether id is one of the pool's instances (configured,
// resolved or assigned) now.
func (p *Pool) Member(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.static {
		if in.Address == id {
			return true
		}
	}
	if _, ok := p.eds[id]; ok {
		return true
	}
	return slices.Contains(p.dns, id)
}

// Addresses returns the addresses of the pool's instances, as its
// scheduler has them.
func (p *Pool) Addresses() []string {
	var ids []string
	for _, st := range p.sched.Instances() {
		ids = append(ids, st.ID)
	}
	return p.prefillIDs(ids) // pd.go: and a P/D pool's prefill-only instances
}

// dnsLoop re-resolves a pool's DNS name and applies membership changes.
func (m *Manager) dnsLoop(ctx context.Context, p *Pool, d config.DNS) {
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	var last []string
	for {
		ips, err := net.DefaultResolver.LookupHost(ctx, d.Name)
		if err != nil {
			m.log.Warn("dns lookup failed; keeping the last instances", "pool", p.name, "name", d.Name, "error", err)
		} else {
			addrs := make([]string, len(ips))
			for i, ip := range ips {
				addrs[i] = net.JoinHostPort(ip, strconv.Itoa(d.Port))
			}
			slices.Sort(addrs)
			if !slices.Equal(addrs, last) {
				last = addrs
				if err := p.setMembers(nil, &addrs); err != nil {
					m.log.Error("applying dns instances", "pool", p.name, "error", err)
				}
				m.log.Info("pool instances from dns", "pool", p.name, "count", len(addrs))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
