package extproc

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

// router is a pool's scheduler as the wiring holds it: the views its
// callers use (flow for streams, membership for the health code, upkeep for
// the background loop), engine load reports, and what the replicas'
// coordinator drives.
type router interface {
	flow
	membership
	upkeep
	coord.Scheduler
	SetEngineLoad(id string, l scheduler.EngineLoad) error
}

// upkeep is what the background loop (ticks, rebalancing rounds, gauges)
// needs from a scheduler. Called from that one goroutine; Apply may run
// concurrently with streams.
type upkeep interface {
	Tick()
	Plan() []scheduler.Move
	Apply(moves []scheduler.Move) int
	Rebalances() bool
	QueueLen() int
	Stats() scheduler.Stats
}

// pool is one set of model servers with its scheduler and tokenizer.
type pool struct {
	name     string
	policy   string
	sched    router     // the scheduler: wiring (store, background loop, admin)
	flow     flow       // sched as the streams use it
	members  membership // sched as the health code uses it
	prompter *tokenize.Prompter
	encoder  tokenize.Encoder
	store    state.Store        // shared with the other replicas (memory: nothing shared)
	coord    *coord.Coordinator // runs over store: exchange rounds, leased rebalancing
	shared   bool               // store is Redis: rebalancing takes leases
	counted  poolCounters       // for the background loop's counters (metrics_more.go)

	xds *xds.Client // the pool's xDS subscription, or nil

	mu     sync.Mutex // guards static, dns, eds, health
	static []config.Instance
	dns    []string                // addresses last resolved
	eds    map[string]xds.Endpoint // the xDS endpoints last applied, by address
	health map[string]*healthState // by instance address
}

// healthState is an instance's passive-failure backoff.
type healthState struct {
	down      bool
	downUntil time.Time
	backoff   time.Duration
}

func newPool(c config.Config, p config.Pool, now func() time.Time, store state.Store) (*pool, error) {
	enc, err := tokenize.Open(p.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	pr, err := tokenize.NewPrompter(enc, tokenize.Config{BlockSize: p.BlockSize})
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	sc := c.SchedulerConfig(p)
	sc.Now = now
	shared := c.State.Backend == "redis"
	sc.Rebalance.External = shared
	sched, err := scheduler.New(sc, instances(p.Instances, nil))
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	return &pool{
		name: p.Name, policy: p.Policy.Name, sched: sched, flow: sched, members: sched, prompter: pr, encoder: enc,
		store: store, shared: shared,
		static: p.Instances, health: map[string]*healthState{},
	}, nil
}

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

// setMembers replaces the pool's instances (config reload or DNS); streams
// in flight are unaffected, queued requests of removed instances re-routed.
// A nil pointer keeps that part as it was.
func (p *pool) setMembers(static *[]config.Instance, resolved *[]string) error {
	p.mu.Lock()
	if static != nil {
		p.static = *static
	}
	if resolved != nil {
		p.dns = *resolved
	}
	list := withXDS(instances(p.static, p.dns), p.eds)
	keep := map[string]bool{}
	for _, in := range list {
		keep[in.ID] = true
	}
	for id := range p.health { // a removed instance that comes back starts afresh
		if !keep[id] {
			delete(p.health, id)
		}
	}
	p.mu.Unlock()
	return p.members.SetInstances(list)
}

// healthOf returns id's health state, creating it. Call with p.mu held.
func (p *pool) healthOf(id string) *healthState {
	h := p.health[id]
	if h == nil {
		h = &healthState{}
		p.health[id] = h
	}
	return h
}

// member reports whether id is one of the pool's instances (configured or
// resolved) now.
func (p *pool) member(id string) bool {
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

func (p *pool) addresses() []string {
	var ids []string
	for _, st := range p.members.Instances() {
		ids = append(ids, st.ID)
	}
	return ids
}

var (
	_ router = (*scheduler.Scheduler)(nil)
	_ upkeep = (*scheduler.Scheduler)(nil)
)
