package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/chattmpl"
	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

// Scheduler is a pool's scheduler as the pool drives it: what routing
// needs (EnqueueAndWait blocks until dispatch, shedding or ctx's end; the
// others do not block), membership and health (called under the pool's
// lock), the background work (ticks, rebalancing, gauges), engine signals
// and what the replicas' coordinator drives. *scheduler.Scheduler is the
// one implementation; tests wrap it (Options.Wrap). Safe for concurrent
// use.
type Scheduler interface {
	EnqueueAndWait(ctx context.Context, r *scheduler.Request) (scheduler.Decision, error)
	FirstToken(r *scheduler.Request)
	Complete(r *scheduler.Request)
	AnyReadyOf(n uint64, only []string) (string, error)

	SetHealthy(id string, healthy bool) error
	SetDraining(id string, draining bool) error
	SetInstances(list []scheduler.Instance) error
	Instances() []scheduler.InstanceState

	Tick()
	Rebalances() bool
	QueueLen() int
	Stats() scheduler.Stats

	SetEngineLoad(id string, l scheduler.EngineLoad) error
	SetEngineLimit(id string, l scheduler.EngineLoad) (time.Duration, error)
	AddCached(id string, blocks []uint64) error
	RemoveCached(id string, blocks []uint64) error
	ClearCached(id string) error
	SetExact(id string, exact bool) error

	coord.Scheduler
}

// Options are a Manager's dependencies. Zero values mean defaults.
type Options struct {
	Logger   *slog.Logger          // default: discard
	Registry prometheus.Registerer // default: no metrics registration
	// HTTPClient runs health checks and engine metric polls (default: a
	// client with the configured health timeout).
	HTTPClient *http.Client
	Now        func() time.Time // default time.Now
	// TickInterval is how often the schedulers' periodic work runs
	// (default 100ms).
	TickInterval time.Duration
	// Getenv reads secrets named by the configuration (default os.Getenv).
	Getenv func(string) string
	// Replica names this replica in shared state (default: host-pid-random).
	Replica string
	// Panicked is told of a background loop that panicked (it is restarted
	// after a backoff); default: nothing beyond the log.
	Panicked func(loop string)
	// MembershipDelay is the least time between two applies of a pool's
	// membership changes; the changes in between are coalesced into one
	// (members.go; default DefaultMembershipDelay, negative: every change
	// at once).
	MembershipDelay time.Duration
	// Wrap, when set, wraps each pool's scheduler as it is built: tests
	// put spies and fakes between a pool and its scheduler.
	Wrap func(Scheduler) Scheduler
}

// ErrModelNotFound is a model no pool serves.
var ErrModelNotFound = errors.New("pool: no pool serves this model")

// Manager holds the pools of a configuration and runs their background
// work. Create it with New, start the work with Run, release it with Close.
type Manager struct {
	cfg  config.Config
	log  *slog.Logger
	m    *metrics
	pd   *pdMetrics
	now  func() time.Time
	tick time.Duration
	// memberDelay is Options.MembershipDelay, defaults applied.
	memberDelay time.Duration
	client      *http.Client
	panicked    func(string)
	pools       []*Pool
	byModel     map[string]*Pool
	def         *Pool             // the "*" pool, or nil
	kv          *kvevents.Metrics // the KV-event subscriptions' series (kvevents.go), nil if none
	kvRelays    *kvRelayMetrics   // the bind-mode relays' series (kvrelay.go), nil if none

	gaugeMu  sync.Mutex                 // serializes UpdateGauges; guards seriesOf and gone
	seriesOf map[string]map[string]bool // pool -> instances with series (forget.go)
	gone     []func(pool, id string)    // OnGone
}

// Pool is one set of model servers with its scheduler and tokenizer. Its
// methods are safe for concurrent use.
type Pool struct {
	name     string
	policy   string
	m        *Manager
	sched    Scheduler
	prompter *tokenize.Prompter
	encoder  tokenize.Encoder
	store    state.Store        // shared with the other replicas (memory: nothing shared)
	coord    *coord.Coordinator // runs over store: exchange rounds, leased rebalancing, dispatch records
	shared   bool               // store is Redis: rebalancing takes leases
	xds      *xds.Client        // the pool's xDS subscription, or nil
	sources  []Source           // engine signal sources (signals.go)
	seq      atomic.Uint64      // spreads Pin's choices
	counted  poolCounters       // the background loop's counters (gauges.go)
	pd       *pdHalf            // the prefill half of a P/D pool, or nil (pd.go)

	// mu guards the membership sources and the instances' health; it is
	// held while either is told to the scheduler, so that a decision taken
	// earlier never overwrites a later one (members.go, health.go).
	mu     sync.Mutex
	static []config.Instance
	dns    []string                // addresses last resolved
	eds    map[string]xds.Endpoint // the xDS endpoints last received, by address
	health map[string]*healthState // by instance address
	// The coalescing of membership changes (members.go): when the last
	// apply ran, the apply scheduled for the changes since (nil: none),
	// and whether Close stopped them.
	applied time.Time
	pending *time.Timer
	closed  bool
}

// New builds the pools of cfg: tokenizers, schedulers, stores, coordinators
// and xDS subscriptions.
func New(cfg config.Config, opt Options) (*Manager, error) {
	m := &Manager{cfg: cfg, log: opt.Logger, now: opt.Now, tick: opt.TickInterval, client: opt.HTTPClient,
		panicked: opt.Panicked, byModel: map[string]*Pool{}}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.tick == 0 {
		m.tick = 100 * time.Millisecond
	}
	switch m.memberDelay = opt.MembershipDelay; {
	case m.memberDelay == 0:
		m.memberDelay = DefaultMembershipDelay
	case m.memberDelay < 0:
		m.memberDelay = 0
	}
	if m.client == nil {
		m.client = &http.Client{Timeout: cfg.Health.Timeout}
	}
	if m.panicked == nil {
		m.panicked = func(string) {}
	}
	m.m = newMetrics(opt.Registry)
	m.pd = newPDMetrics(opt.Registry)
	m.kv = newKVMetrics(cfg, opt.Registry)
	m.kvRelays = newKVRelayMetrics(cfg, opt.Registry)
	for i, pc := range cfg.Pools {
		store, err := newStore(cfg, pc.Name, opt, m.log)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
		}
		p, err := m.newPool(pc, store, opt.Wrap)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.pools = append(m.pools, p) // for Close from here on
		if p.coord, err = newCoordinator(cfg, p, m.tick, m.now); err != nil {
			m.Close()
			return nil, err
		}
		m.m.initPool(p.name)
		if p.pd != nil {
			m.pd.init(p.name)
			p.mu.Lock()
			err = p.setInstances(p.memberList()) // the roles and their gauges
			p.mu.Unlock()
			if err != nil {
				m.Close()
				return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
			}
		}
		if p.xds, err = m.newXDSClient(pc, fmt.Sprintf("pools[%d]", i)); err != nil {
			m.Close()
			return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
		}
		registerXDS(opt.Registry, p, m.now)
		p.sources = m.sources(pc)
		for _, model := range pc.Models {
			if model == "*" {
				m.def = p
			} else {
				m.byModel[model] = p
			}
		}
	}
	return m, nil
}

func (m *Manager) newPool(pc config.Pool, store state.Store, wrap func(Scheduler) Scheduler) (*Pool, error) {
	enc, err := tokenize.Open(pc.Tokenizer)
	if err != nil {
		closeStore(store)
		return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
	}
	tmpl, err := chattmpl.Resolve(pc.ChatTemplate, pc.Tokenizer)
	if err != nil {
		enc.Close()
		closeStore(store)
		return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
	}
	rendering := "model"
	if tmpl.Template == nil {
		rendering = "builtin"
		log := m.log.Warn // a tokenizer file without its template: the tokens could have been the engine's
		if pc.Tokenizer == "" || pc.ChatTemplate == chattmpl.SettingBuiltin {
			log = m.log.Info
		}
		log("chat template: none, chats get the builtin approximate rendering (the router's tokens differ from the engine's)",
			"pool", pc.Name, "why", tmpl.From)
	} else {
		m.log.Info("chat template: the model's own", "pool", pc.Name, "file", tmpl.From)
	}
	m.m.chatTemplate.WithLabelValues(pc.Name, rendering).Set(1)
	pr, err := tokenize.NewPrompter(enc, tokenize.Config{BlockSize: pc.BlockSize, Template: tmpl.Template})
	if err != nil {
		enc.Close()
		closeStore(store)
		return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
	}
	sc := m.cfg.SchedulerConfig(pc)
	sc.Now = m.now
	shared := m.cfg.State.Backend == "redis"
	sc.Rebalance.External = shared
	pd, err := newPDHalf(pc, &sc) // the prefill half, and the decode policy in sc
	if err != nil {
		enc.Close()
		closeStore(store)
		return nil, err
	}
	s, err := scheduler.New(sc, instances(decodeOnly(pc), nil))
	if err != nil {
		enc.Close()
		closeStore(store)
		return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
	}
	var sched Scheduler = s
	if wrap != nil {
		sched = wrap(sched)
	}
	return &Pool{
		name: pc.Name, policy: pc.Policy.Name, m: m, sched: sched, prompter: pr, encoder: enc,
		store: store, shared: shared, static: pc.Instances, health: map[string]*healthState{}, pd: pd,
	}, nil
}

// Close releases the tokenizers, the xDS subscriptions and the
// shared-state connections. Call it after Run has returned.
func (m *Manager) Close() {
	m.client.CloseIdleConnections()
	for _, p := range m.pools {
		p.stopMembers()
		p.encoder.Close()
		if p.xds != nil {
			p.xds.Close()
		}
		closeStore(p.store)
	}
}

// closeStore closes a store that holds connections (Redis).
func closeStore(s state.Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		c.Close()
	}
}

// Pools returns the pools in configuration order.
func (m *Manager) Pools() []*Pool { return m.pools }

// Named returns the pool called name, or nil ("" names none).
func (m *Manager) Named(name string) *Pool {
	if name == "" {
		return nil
	}
	for _, p := range m.pools {
		if p.name == name {
			return p
		}
	}
	return nil
}

// ForModel returns the pool serving model: the one that lists it, else the
// "*" pool; ErrModelNotFound without either.
func (m *Manager) ForModel(model string) (*Pool, error) {
	if p, ok := m.byModel[model]; ok {
		return p, nil
	}
	if m.def != nil {
		return m.def, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrModelNotFound, model)
}

// Default is the pool of requests that name no model: the "*" pool, else
// the first.
func (m *Manager) Default() *Pool {
	if m.def != nil {
		return m.def
	}
	return m.pools[0]
}

// Ready reports whether every pool has at least one ready instance and
// every pool from xDS has reached its management server within its grace.
func (m *Manager) Ready() error {
	for _, p := range m.pools {
		if _, err := p.sched.AnyReadyOf(0, nil); err != nil {
			return fmt.Errorf("pool %s: %w", p.name, err)
		}
	}
	for i, pc := range m.cfg.Pools {
		if pc.XDS != nil {
			if err := m.xdsReady(m.pools[i], pc.XDS.Grace); err != nil {
				return err
			}
		}
	}
	return nil
}

// Readiness is what a gateway's readiness check asks of an endpoint
// picker: every pool has a ready instance (Ready). Shared state is not
// part of it: during a Redis outage a replica routes on its own view
// (agreement between replicas is delayed, no request is), so a gateway
// that fails closed must keep sending it requests. StateSynced reports
// Redis on its own.
func (m *Manager) Readiness() error { return m.Ready() }

// StateSynced reports whether every pool with shared state is synced
// (Redis answered the last operations; not before the first success and
// not during an outage). Nil without shared state.
func (m *Manager) StateSynced() error {
	for _, p := range m.pools {
		if p.shared && !p.store.Stats().Up {
			return fmt.Errorf("pool %s: shared state not synced (redis unreachable); routing on the local view", p.name)
		}
	}
	return nil
}

// Run does the background work until ctx ends: scheduler ticks (queue
// expiry, rebalancing, dispatch) and gauges, the shared state's rounds,
// DNS re-resolution, the xDS subscriptions and the engine signal sources
// (health checks, engine metrics). Each loop is supervised: a panic is
// logged and the loop restarts.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { m.supervise(ctx, "tick", m.ticker) })
	for i, pc := range m.cfg.Pools {
		p := m.pools[i]
		wg.Go(func() {
			if err := p.store.Run(ctx, p.coord); err != nil {
				m.log.Error("shared state stopped", "pool", p.name, "error", err)
			}
		})
		for _, src := range p.sources {
			wg.Go(func() { m.supervise(ctx, src.Name(), func(ctx context.Context) { src.Run(ctx, p) }) })
		}
		if pc.DNS != nil {
			wg.Go(func() { m.supervise(ctx, "dns", func(ctx context.Context) { m.dnsLoop(ctx, p, *pc.DNS) }) })
		}
		if p.xds != nil {
			wg.Go(func() { m.supervise(ctx, "xds", func(ctx context.Context) { m.xdsLoop(ctx, p) }) })
		}
	}
	wg.Wait()
	// The probes' and metrics polls' keep-alive connections would
	// outlive the sources.
	m.client.CloseIdleConnections()
}

func (m *Manager) ticker(ctx context.Context) {
	t := time.NewTicker(m.tick)
	defer t.Stop()
	gauges := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range m.pools {
			p.sched.Tick()
			p.tickPD()
			if p.shared && p.sched.Rebalances() {
				p.coord.Rebalance(ctx) // leased: see coord.Coordinator.Rebalance
			}
		}
		if gauges++; gauges%10 == 0 {
			m.UpdateGauges()
		}
	}
}

// Reload applies the instance lists of a new configuration (pools matched
// by name; other changes need a restart). Streams in flight continue.
func (m *Manager) Reload(c config.Config) {
	for _, pc := range c.Pools {
		if p := m.Named(pc.Name); p != nil {
			if err := p.setMembers(&pc.Instances, nil); err != nil {
				m.log.Error("reload", "pool", p.name, "error", err)
			}
		}
	}
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Policy is the name of the pool's routing policy.
func (p *Pool) Policy() string { return p.policy }

// Instances returns the pool's instances as its scheduler sees them.
func (p *Pool) Instances() []scheduler.InstanceState { return p.sched.Instances() }

// Scheduler is the pool's scheduler (as wrapped by Options.Wrap), for the
// admin endpoints and tests.
func (p *Pool) Scheduler() Scheduler { return p.sched }

// Coordinator is the pool's replica coordinator.
func (p *Pool) Coordinator() *coord.Coordinator { return p.coord }

// Store is the pool's shared-state store.
func (p *Pool) Store() state.Store { return p.store }

var _ Scheduler = (*scheduler.Scheduler)(nil)
