package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

// Pools whose instances come from an xDS management server: the
// endpoints of one cluster's ClusterLoadAssignment, as Envoy routes to
// them. Each assignment goes through the same membership path as DNS and
// reloads (applyMembers: queued requests of removed instances re-routed,
// requests in flight unaffected); then the endpoints' health applies:
// DRAINING marks the instance draining (no new requests), UNHEALTHY and
// TIMEOUT take it out until the server says otherwise (the router's own
// checks cannot bring it back). load_balancing_weight becomes the
// instance's weight (its share of each hash ring), relative to the
// lightest endpoint's and at most maxXDSWeight. Locality and priority
// are logged only: every priority is a member alike.

// newXDSClient returns the subscription of pool pc, or nil.
func (m *Manager) newXDSClient(pc config.Pool, at string) (*xds.Client, error) {
	x := pc.XDS
	if x == nil {
		return nil, nil
	}
	tc, err := x.TLSConfig(at + ".xds")
	if err != nil {
		return nil, err
	}
	return xds.New(xds.Options{
		Address: x.Address, TLS: tc, API: x.API, Cluster: x.Cluster, NodeID: x.NodeID, NodeCluster: x.NodeCluster,
		MaxEndpoints: x.MaxEndpoints, Logger: m.log.With("pool", pc.Name), Now: m.now,
	})
}

// xdsLoop follows the pool's subscription until ctx ends.
func (m *Manager) xdsLoop(ctx context.Context, p *Pool) {
	p.xds.Run(ctx, func(eps []xds.Endpoint) error {
		err := p.setXDS(eps)
		if err == nil && len(eps) == 0 {
			m.log.Warn("xds assignment has no endpoints: the pool is empty", "pool", p.name)
		}
		return err
	})
}

// setXDS makes eps the pool's endpoints from xDS, their health and
// draining included, applied as members.go says. It refuses (and keeps
// the previous endpoints) an assignment the scheduler would refuse.
func (p *Pool) setXDS(eps []xds.Endpoint) error {
	byAddr := make(map[string]xds.Endpoint, len(eps))
	for _, e := range eps {
		byAddr[e.Address] = e
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.eds
	p.eds = byAddr
	if err := scheduler.ValidateInstances(p.memberList()); err != nil {
		p.eds = old
		return fmt.Errorf("pool %s: %w", p.name, err)
	}
	p.changedMembers()
	return nil
}

// maxXDSWeight caps an xDS endpoint's weight relative to the lightest
// one: a weight scales an instance's virtual nodes on every ring, so
// weights such as 1 and 1000000 must not turn into a million points.
const maxXDSWeight = 16

// withXDS appends the xDS endpoints not already in list (a static
// instance of the same address wins), with their weights relative to the
// lightest endpoint's, capped at maxXDSWeight.
func withXDS(list []scheduler.Instance, eps map[string]xds.Endpoint) []scheduler.Instance {
	if len(eps) == 0 {
		return list
	}
	seen := make(map[string]bool, len(list))
	for _, in := range list {
		seen[in.ID] = true
	}
	lightest := uint32(0)
	for _, e := range eps {
		if lightest == 0 || e.Weight < lightest {
			lightest = e.Weight
		}
	}
	lightest = max(lightest, 1)
	for _, addr := range slices.Sorted(maps.Keys(eps)) { // a stable order: the scheduler keeps what did not move
		if !seen[addr] {
			w := min(float64(max(eps[addr].Weight, 1))/float64(lightest), maxXDSWeight)
			list = append(list, scheduler.Instance{ID: addr, Weight: w})
		}
	}
	return list
}

// xdsDown reports whether the management server says id is unhealthy.
// Call with p.mu held.
func (p *Pool) xdsDown(id string) bool {
	e, ok := p.eds[id]
	return ok && e.Health == xds.Unhealthy
}

// xdsReady reports a pool whose management server has been unreachable
// for longer than its grace (the last list stays in use).
func (m *Manager) xdsReady(p *Pool, grace time.Duration) error {
	if p.xds == nil {
		return nil
	}
	if up, since := p.xds.Since(); !up && m.now().Sub(since) > grace {
		return fmt.Errorf("pool %s: xds management server unreachable since %s; serving the last endpoints received", p.name, since.UTC().Format(time.RFC3339))
	}
	return nil
}

// registerXDS exports the subscription's state of pool p:
// dualmap_xds_connected{pool} is 1 while a stream to the management server
// is open, dualmap_xds_disconnected_seconds{pool} how long it has not been.
func registerXDS(reg prometheus.Registerer, p *Pool, now func() time.Time) {
	if reg == nil || p.xds == nil {
		return
	}
	labels := prometheus.Labels{"pool": p.name}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dualmap_xds_connected", ConstLabels: labels,
			Help: "1 while the pool's stream to its xDS management server is open."}, func() float64 {
			if up, _ := p.xds.Since(); up {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dualmap_xds_disconnected_seconds", ConstLabels: labels,
			Help: "How long the pool has been without a stream to its xDS management server (0 while connected)."}, func() float64 {
			if up, since := p.xds.Since(); !up {
				return now().Sub(since).Seconds()
			}
			return 0
		}),
	)
}
