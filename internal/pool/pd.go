package pool

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/scheduler"
)

// Prefill/decode pools (pools[].pd). Every request is pinned to a decode
// instance, chosen by the pool's scheduler over the instances of role
// decode or both with the decode policy (decode-capacity by default). When
// remote prefill pays (the decider below), a prefill instance is chosen by
// a second scheduler of its own over the instances of role prefill or
// both, with the pool's policy (DualMap by default: its own rings, key
// depth and rebalancer, so a prefix's prefills stay on its candidate set),
// and named in the pd.header request header, which the decode side's P/D
// sidecar (llm-d's cmd/pd-sidecar) reads: it sends the prompt there first
// and then decodes with the KV-transfer parameters the prefill returned.
//
// The prefill half holds its load from its dispatch to the request's
// first token (its prefill work only); the decode half as any request,
// to the end. Both are released on every path through the Ticket. A 5xx
// answer to a request with a remote prefill takes the prefill instance
// out, not the decode instance: the sidecar answers 5xx when the prefill
// instance fails, and the decode instance is judged by its own probes
// and by the requests it prefills itself. Roles come from the static
// list (instances[].role), the DNS name (dns.role) or the xDS endpoint
// metadata (filter_metadata "dualmap", key "role"); an instance without
// one does both. The prefill half's load is this replica's own view: it is
// not exchanged with the other replicas.

// Decider reasons, as counted in dualmap_pd_decisions_total and put on
// the request's span.
const (
	PDRemote      = "remote"              // a prefill instance prefills
	PDShort       = config.PDShort        // the uncached part is under pd.min_uncached_tokens
	PDCached      = config.PDCached       // the decode instance holds pd.decode_hit_ratio of the prompt
	PDSame        = "same_instance"       // the prefill choice is the decode instance (role both)
	PDUnavailable = "prefill_unavailable" // no prefill instance could take it (none ready, shed)
)

var pdReasons = []string{PDRemote, PDShort, PDCached, PDSame, PDUnavailable}

// pdHalf is a P/D pool's prefill scheduler and decider settings.
type pdHalf struct {
	cfg   config.PD
	sched *scheduler.Scheduler // over the instances that prefill
	role  string               // of DNS addresses
	// Guarded by Pool.mu: the roles of the members, by address.
	roles map[string]string
}

// pdMetrics are the P/D series, per pool.
type pdMetrics struct {
	decisions *prometheus.CounterVec // pool, reason
	inflight  *prometheus.GaugeVec   // pool, role: prefill halves and the requests they prefill for
	failures  *prometheus.CounterVec // pool: 5xx answers to requests with a remote prefill
	instances *prometheus.GaugeVec   // pool, role
}

func newPDMetrics(reg prometheus.Registerer) *pdMetrics {
	m := &pdMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dualmap_pd_decisions_total",
			Help: "Prefill/decode pools: the decider's outcome per request (remote: a prefill instance prefills; short, decode_cached, same_instance, prefill_unavailable: the decode instance prefills)."},
			[]string{"pool", "reason"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dualmap_pd_inflight",
			Help: "Prefill/decode pools: requests in flight by role (prefill: remote prefills not yet through their first token; decode: requests pinned to a decode instance)."},
			[]string{"pool", "role"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dualmap_pd_prefill_failures_total",
			Help: "Prefill/decode pools: 5xx answers to requests with a remote prefill (the prefill instance is taken out)."},
			[]string{"pool"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dualmap_pd_instances",
			Help: "Prefill/decode pools: members by role (prefill, decode, both)."},
			[]string{"pool", "role"}),
	}
	if reg != nil {
		reg.MustRegister(m.decisions, m.inflight, m.failures, m.instances)
	}
	return m
}

// init creates pool's series at zero.
func (m *pdMetrics) init(pool string) {
	for _, r := range pdReasons {
		m.decisions.WithLabelValues(pool, r)
	}
	for _, r := range []string{config.RolePrefill, config.RoleDecode} {
		m.inflight.WithLabelValues(pool, r)
	}
	m.failures.WithLabelValues(pool)
}

// newPDHalf builds pool pc's prefill scheduler (sc with the pool's policy
// and its parameters), or returns nil for a pool without pd; it turns sc
// into the decode half's (pd.decode_policy, at its default parameters).
func newPDHalf(pc config.Pool, sc *scheduler.Config) (*pdHalf, error) {
	if pc.PD == nil {
		return nil, nil
	}
	h := &pdHalf{cfg: *pc.PD, roles: map[string]string{}}
	if pc.DNS != nil {
		h.role = pc.DNS.Role
	}
	pre := *sc
	// Nothing of the prefill half is exchanged with the other replicas: it
	// rebalances on its own, without the coordinator's leases.
	pre.Rebalance.External = false
	var err error
	static := instances(pc.Instances, nil)
	var list []scheduler.Instance
	for i, in := range pc.Instances {
		if config.Prefills(in.Role) {
			list = append(list, static[i])
		}
	}
	if h.sched, err = scheduler.New(pre, list); err != nil {
		return nil, fmt.Errorf("pool %s: prefill scheduler: %w", pc.Name, err)
	}
	sc.Policy, sc.Params = pc.PD.DecodePolicy, nil
	return h, nil
}

// decodeOnly returns the static instances that decode.
func decodeOnly(pc config.Pool) []config.Instance {
	if pc.PD == nil {
		return pc.Instances
	}
	var out []config.Instance
	for _, in := range pc.Instances {
		if config.Decodes(in.Role) {
			out = append(out, in)
		}
	}
	return out
}

// setInstances tells the schedulers the members in list: every one to a
// plain pool's, each P/D half its role's. Call with p.mu held.
func (p *Pool) setInstances(list []scheduler.Instance) error {
	h := p.pd
	if h == nil {
		return p.sched.SetInstances(list)
	}
	clear(h.roles)
	for _, in := range p.static {
		h.roles[in.Address] = in.Role
	}
	for _, a := range p.dns {
		if _, ok := h.roles[a]; !ok {
			h.roles[a] = h.role
		}
	}
	for a, e := range p.eds {
		if _, ok := h.roles[a]; !ok {
			h.roles[a] = e.Role
		}
	}
	var dec, pre []scheduler.Instance
	counts := map[string]int{config.RolePrefill: 0, config.RoleDecode: 0, config.RoleBoth: 0}
	for _, in := range list {
		r := h.roles[in.ID]
		if config.Decodes(r) {
			dec = append(dec, in)
		}
		if config.Prefills(r) {
			pre = append(pre, in)
		}
		if r == "" {
			r = config.RoleBoth
		}
		counts[r]++
	}
	if err := p.sched.SetInstances(dec); err != nil {
		return err
	}
	if err := h.sched.SetInstances(pre); err != nil {
		return fmt.Errorf("prefill instances: %w", err)
	}
	for r, n := range counts {
		p.m.pd.instances.WithLabelValues(p.name, r).Set(float64(n))
	}
	return nil
}

// setHealthy tells the schedulers id's health; an error only when neither
// has id. Call with p.mu held.
func (p *Pool) setHealthy(id string, up bool) error {
	err := p.sched.SetHealthy(id, up)
	if p.pd != nil {
		if e := p.pd.sched.SetHealthy(id, up); e == nil {
			err = nil
		}
	}
	return err
}

// setDraining is setHealthy for draining.
func (p *Pool) setDraining(id string, draining bool) error {
	err := p.sched.SetDraining(id, draining)
	if p.pd != nil {
		if e := p.pd.sched.SetDraining(id, draining); e == nil {
			err = nil
		}
	}
	return err
}

// prefillIDs appends to ids the prefill-only members (the others are the
// decode scheduler's).
func (p *Pool) prefillIDs(ids []string) []string {
	if p.pd == nil {
		return ids
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.pd.sched.Instances() {
		if !config.Decodes(p.pd.roles[st.ID]) {
			ids = append(ids, st.ID)
		}
	}
	return ids
}

// gaugeMembers are the instance states the per-instance gauges show: the
// decode scheduler's, and in a P/D pool the prefill scheduler's of the
// prefill-only instances (an instance of role both shows its decode half).
func (p *Pool) gaugeMembers() []scheduler.InstanceState {
	members := p.sched.Instances()
	if p.pd == nil {
		return members
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.pd.sched.Instances() {
		if !config.Decodes(p.pd.roles[st.ID]) {
			members = append(members, st)
		}
	}
	return members
}

// Role returns the role of member id in a P/D pool (prefill, decode or
// both), or "" in a pool without pd.
func (p *Pool) Role(id string) string {
	if p.pd == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.pd.roles[id]; r != "" {
		return r
	}
	return config.RoleBoth
}

// PD returns the pool's P/D settings, or nil for a pool without pd.
func (p *Pool) PD() *config.PD {
	if p.pd == nil {
		return nil
	}
	return &p.pd.cfg
}

// PrefillInstances returns the prefill half's instances as its scheduler
// sees them (nil in a pool without pd).
func (p *Pool) PrefillInstances() []scheduler.InstanceState {
	if p.pd == nil {
		return nil
	}
	return p.pd.sched.Instances()
}

// PrefillScheduler is the prefill half's scheduler (nil without pd), for
// the admin endpoints and tests.
func (p *Pool) PrefillScheduler() *scheduler.Scheduler {
	if p.pd == nil {
		return nil
	}
	return p.pd.sched
}

// decide is the decider of a request dispatched to its decode instance
// (t.dec): it returns the reason, and for PDRemote t.pre is dispatched to
// the prefill instance it returns. ctx bounds a wait in the prefill
// half's router queue.
func (h *pdHalf) decide(ctx context.Context, t *Ticket) (string, string) {
	r := &t.req
	if why := h.cfg.Local(r.Tokens, t.dec.CachedTokens); why != "" {
		return why, ""
	}
	t.pre = scheduler.Request{Blocks: r.Blocks, Tokens: r.Tokens, SLO: r.SLO, Priority: r.Priority, Session: r.Session}
	dec, err := h.sched.EnqueueAndWait(ctx, &t.pre)
	if err != nil {
		return PDUnavailable, ""
	}
	if dec.Instance == t.dec.Instance {
		h.sched.Complete(&t.pre) // nothing held apart: it prefills where it decodes
		return PDSame, ""
	}
	return PDRemote, dec.Instance
}

// routePD runs the decider for t, counts it, and holds the halves.
func (p *Pool) routePD(ctx context.Context, t *Ticket) {
	t.pdReason, t.prefill = p.pd.decide(ctx, t)
	m := p.m.pd
	m.decisions.WithLabelValues(p.name, t.pdReason).Inc()
	m.inflight.WithLabelValues(p.name, config.RoleDecode).Inc()
	if t.prefill != "" {
		m.inflight.WithLabelValues(p.name, config.RolePrefill).Inc()
	}
}

// prefillDone releases the prefill half of t (its first token, or its
// end), once.
func (t *Ticket) prefillDone(first bool) {
	if t.prefill == "" || t.preDone {
		return
	}
	t.preDone = true
	s := t.p.pd.sched
	if first {
		s.FirstToken(&t.pre)
	}
	s.Complete(&t.pre)
	t.p.m.pd.inflight.WithLabelValues(t.p.name, config.RolePrefill).Dec()
}

// pdDone releases the P/D accounting of t at its end.
func (t *Ticket) pdDone() {
	if t.p.pd == nil {
		return
	}
	t.prefillDone(false)
	t.p.m.pd.inflight.WithLabelValues(t.p.name, config.RoleDecode).Dec()
}

// pdFailed attributes a 5xx answer of a request with a remote prefill to
// its prefill instance; it reports whether it did.
func (t *Ticket) pdFailed(status int) bool {
	if t.prefill == "" || status < 500 {
		return false
	}
	t.p.m.pd.failures.WithLabelValues(t.p.name).Inc()
	t.p.failed(t.prefill)
	return true
}

// Prefill is the prefill instance named for the request ("" when the
// decode instance prefills) and the decider's reason ("" outside P/D
// pools).
func (t *Ticket) Prefill() (instance, reason string) { return t.prefill, t.pdReason }

// tickPD runs the prefill half's periodic work.
func (p *Pool) tickPD() {
	if p.pd != nil {
		p.pd.sched.Tick()
	}
}
