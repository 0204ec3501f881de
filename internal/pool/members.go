package pool

import (
	"context"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

// Membership: a pool's instances are its static list (the configuration,
// replaced by Reload), the addresses its DNS name resolves to, and the
// endpoints its xDS management server assigns (xds.go). Every change goes
// through setMembers or setXDS under the pool's lock: queued requests of
// removed instances are re-routed, requests in flight are unaffected, and
// a removed instance that comes back starts with a fresh health record.
//
// Changes are coalesced (issue 24: a management server flapping 4,096
// endpoints kept a core busy). A change is checked at once (an invalid one
// is refused, and xDS NACKs it) and recorded; it is applied to the
// scheduler at once when the last apply is at least Options.MembershipDelay
// (default 100ms) old, and otherwise when it is that old, together with
// every change since: a burst applies its first change and then only its
// last, at most one apply per delay, and the latest change is applied
// within one delay. Health verdicts for an instance not applied yet are
// kept and applied with it.

// DefaultMembershipDelay is the least time between two membership applies
// of a pool (Options.MembershipDelay).
const DefaultMembershipDelay = 100 * time.Millisecond

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

// memberList is the pool's instances from all sources. Call with p.mu
// held.
func (p *Pool) memberList() []scheduler.Instance {
	return withXDS(instances(p.static, p.dns), p.eds)
}

// setMembers replaces the pool's static list or resolved addresses (a nil
// pointer keeps that part as it was); the scheduler is told as the package
// doc says. It refuses (and keeps the previous sources) a list the
// scheduler would refuse.
func (p *Pool) setMembers(static *[]config.Instance, resolved *[]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldStatic, oldDNS := p.static, p.dns
	if static != nil {
		p.static = *static
	}
	if resolved != nil {
		p.dns = *resolved
	}
	if err := scheduler.ValidateInstances(p.memberList()); err != nil {
		p.static, p.dns = oldStatic, oldDNS
		return err
	}
	p.changedMembers()
	return nil
}

// changedMembers applies the pool's sources now, or schedules it (see the
// package doc). Call with p.mu held.
func (p *Pool) changedMembers() {
	if p.pending != nil || p.closed {
		return // the pending apply takes this change too
	}
	d := p.m.memberDelay
	now := time.Now()
	wait := p.applied.Add(d).Sub(now)
	if d <= 0 || wait <= 0 {
		p.applyMembers(now)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.pending != t || p.closed {
			return // flushed or closed meanwhile
		}
		p.pending = nil
		p.applyMembers(time.Now())
	})
	p.pending = t
}

// stopMembers drops a scheduled change and refuses later ones (Close).
func (p *Pool) stopMembers() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
	}
	p.closed = true
}

// applyMembers tells the scheduler the pool's instances from all sources,
// forgets the health of those that left, and applies the health verdicts
// and the xDS states of the members (each a no-op where nothing changed).
// Call with p.mu held.
func (p *Pool) applyMembers(now time.Time) {
	p.applied = now
	list := p.memberList()
	keep := make(map[string]bool, len(list))
	for _, in := range list {
		keep[in.ID] = true
	}
	for id := range p.health { // a removed instance that comes back starts afresh
		if !keep[id] {
			delete(p.health, id)
		}
	}
	if err := p.setInstances(list); err != nil { // checked when recorded; pd.go: by role in a P/D pool
		p.m.log.Error("applying pool instances", "pool", p.name, "error", err)
		return
	}
	for id := range p.health {
		p.applyHealth(id)
	}
	for addr, e := range p.eds {
		if p.health[addr] == nil {
			p.applyHealth(addr)
		}
		if err := p.setDraining(addr, e.Health == xds.Draining); err != nil {
			p.m.log.Debug("xds draining for an instance not in the pool", "pool", p.name, "instance", addr)
		}
	}
}

// Member reports whether id is one of the pool's instances (configured,
// resolved or assigned) now, as last received: the scheduler has it within
// the membership delay.
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
