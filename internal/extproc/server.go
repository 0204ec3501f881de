package extproc

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

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dualmap/dualmap/internal/config"
)

// Options are a Server's dependencies. Zero values mean defaults.
type Options struct {
	Logger   *slog.Logger          // default: discard
	Registry prometheus.Registerer // default: no metrics registration
	// HTTPClient runs health checks (default: a client with the
	// configured timeout).
	HTTPClient *http.Client
	Now        func() time.Time // default time.Now
	// TickInterval is how often the schedulers' periodic work runs
	// (default 100ms).
	TickInterval time.Duration
	// Getenv reads secrets named by the configuration (default os.Getenv).
	Getenv func(string) string
	// Replica names this replica in shared state (default: host-pid-random).
	Replica string
	// Tracer records a dualmap.route span per request (default nil:
	// tracing off; see trace.go and internal/telemetry).
	Tracer trace.Tracer
}

// Server is the ext_proc service. Create it with New, register it on a
// gRPC server with Register, start its background work with Run.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg     config.Config
	log     *slog.Logger
	m       *metrics
	now     func() time.Time
	tick    time.Duration
	client  *http.Client
	pools   []*pool
	byModel map[string]*pool
	def     *pool // the "*" pool, or nil
	seq     atomic.Uint64
	bounds  *bounds
	tracer  trace.Tracer // nil: tracing off

	rm       *routeMetrics // route settings (routesettings.go)
	routeLog routeLog

	bgMu sync.Mutex // serializes background changes (health, membership, rebalancing)
}

// New builds the pools of cfg (tokenizers, schedulers).
func New(cfg config.Config, opt Options) (*Server, error) {
	s := &Server{cfg: cfg, log: opt.Logger, now: opt.Now, tick: opt.TickInterval, client: opt.HTTPClient, byModel: map[string]*pool{}, tracer: opt.Tracer}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.tick == 0 {
		s.tick = 100 * time.Millisecond
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: cfg.Health.Timeout}
	}
	s.m = newMetrics(opt.Registry)
	s.rm = newRouteMetrics(opt.Registry)
	s.bounds = &bounds{maxStreams: int64(cfg.Limits.MaxStreams), maxBuffered: int64(cfg.Limits.MaxBufferedBytes),
		maxPerClient: int64(cfg.Limits.MaxBufferedBytesPerClient)}
	registerBounds(opt.Registry, s.bounds)
	for i, pc := range cfg.Pools {
		store, err := newStore(cfg, pc.Name, opt, s.log)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("extproc: pool %s: %w", pc.Name, err)
		}
		p, err := newPool(cfg, pc, s.now, store)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("extproc: %w", err)
		}
		if p.coord, err = newCoordinator(cfg, p, s.tick, s.now); err != nil {
			s.pools = append(s.pools, p) // for Close
			s.Close()
			return nil, fmt.Errorf("extproc: %w", err)
		}
		s.pools = append(s.pools, p)
		s.m.initPool(p.name)
		if p.xds, err = newXDSClient(pc, s, fmt.Sprintf("pools[%d]", i)); err != nil {
			s.Close()
			return nil, fmt.Errorf("extproc: pool %s: %w", pc.Name, err)
		}
		registerXDS(opt.Registry, p, s.now)
		for _, model := range pc.Models {
			if model == "*" {
				s.def = p
			} else {
				s.byModel[model] = p
			}
		}
	}
	return s, nil
}

// Register adds the ext_proc service to g.
func (s *Server) Register(g *grpc.Server) { extprocv3.RegisterExternalProcessorServer(g, s) }

// Close releases the tokenizers and the shared-state connections. Call it
// after Run has returned.
func (s *Server) Close() {
	for _, p := range s.pools {
		p.encoder.Close()
		if p.xds != nil {
			p.xds.Close()
		}
		if c, ok := p.store.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// poolFor returns the pool serving model.
func (s *Server) poolFor(model string) (*pool, error) {
	if p, ok := s.byModel[model]; ok {
		return p, nil
	}
	if s.def != nil {
		return s.def, nil
	}
	return nil, fmt.Errorf("%w: %q", errModelNotFound, model)
}

// Ready reports whether every pool has at least one ready instance.
func (s *Server) Ready() error {
	for _, p := range s.pools {
		if _, err := p.sched.AnyReadyOf(0, nil); err != nil {
			return fmt.Errorf("pool %s: %w", p.name, err)
		}
	}
	for i, pc := range s.cfg.Pools {
		if pc.XDS != nil {
			if err := s.xdsReady(s.pools[i], pc.XDS.Grace); err != nil {
				return err
			}
		}
	}
	return nil
}

// Run does the background work until ctx ends: scheduler ticks (queue
// expiry, rebalancing, dispatch), health checks, DNS re-resolution and
// metric gauges.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.supervise(ctx, "tick", s.ticker) }()
	for i, pc := range s.cfg.Pools {
		p := s.pools[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.store.Run(ctx, p.coord); err != nil {
				s.log.Error("shared state stopped", "pool", p.name, "error", err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.supervise(ctx, "health", func(ctx context.Context) { s.healthLoop(ctx, p) })
		}()
		if pc.DNS != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.supervise(ctx, "dns", func(ctx context.Context) { s.dnsLoop(ctx, p, *pc.DNS) })
			}()
		}
		if p.xds != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.supervise(ctx, "xds", func(ctx context.Context) { s.xdsLoop(ctx, p) })
			}()
		}
		if pc.Metrics.Enabled {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.supervise(ctx, "engine_metrics", func(ctx context.Context) { s.metricsLoop(ctx, p, pc.Metrics) })
			}()
		}
	}
	wg.Wait()
}

func (s *Server) ticker(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	gauges := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range s.pools {
			p.sched.Tick()
			if p.shared && p.sched.Rebalances() {
				p.coord.Rebalance(ctx) // leased: see coord.Coordinator.Rebalance
			}
		}
		if gauges++; gauges%10 == 0 {
			s.updateGauges()
		}
	}
}

// background runs f, one such change at a time, so that a health or
// membership decision taken earlier never overwrites a later one.
func (s *Server) background(f func()) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	f()
}

func (s *Server) updateGauges() {
	for _, p := range s.pools {
		st := p.store.Stats()
		up := 0.0
		if st.Up {
			up = 1
		}
		s.m.stateUp.WithLabelValues(p.name).Set(up)
		s.m.stateDelay.WithLabelValues(p.name).Set(st.PropagationP99.Seconds())
		s.m.stateLag.WithLabelValues(p.name).Set(st.PropagationLast.Seconds())
		advance(s.m.stateErrors.WithLabelValues(p.name), &p.counted.stateErrors, st.Errors)
		advance(s.m.migrations.WithLabelValues(p.name), &p.counted.migrations, p.sched.Stats().Migrations)
		for reason, n := range map[string]uint64{
			"reply": st.RefusedReplies, "malformed": st.Malformed, "oversized": st.Oversized,
			"clamped": st.Clamped, "ignored": st.Ignored, "bad_clock": st.BadClock, "panic": st.Panics,
		} {
			s.m.stateRejected.WithLabelValues(p.name, reason).Set(float64(n))
		}
		s.m.queueDepth.WithLabelValues(p.name).Set(float64(p.sched.QueueLen()))
		for _, st := range p.sched.Instances() {
			s.m.pending.WithLabelValues(p.name, st.ID).Set(float64(st.QueuedTokens + st.PendingTokens))
			s.m.queued.WithLabelValues(p.name, st.ID).Set(float64(st.Queued))
			s.m.queuedTok.WithLabelValues(p.name, st.ID).Set(float64(st.QueuedTokens))
			s.m.running.WithLabelValues(p.name, st.ID).Set(float64(st.Running))
			s.m.aheadCost.WithLabelValues(p.name, st.ID).Set(st.AheadCost)
			full := 0.0
			if st.EngineQueuing {
				full = 1
			}
			s.m.engineFull.WithLabelValues(p.name, st.ID).Set(full)
			h := 0.0
			if st.Healthy && !st.Draining {
				h = 1
			}
			s.m.healthy.WithLabelValues(p.name, st.ID).Set(h)
		}
	}
}

// Process serves one ext_proc stream, i.e. one HTTP request: each message
// is answered in turn (in full duplex, with what the stream owes after the
// answer: see stream.next), and a message the stream refuses ends it with a gRPC
// error (Envoy then fails the request) after releasing what it held. A
// stream over limits.max_streams is turned away (turnAway).
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	if !s.bounds.admit() {
		return s.turnAway(srv)
	}
	defer s.bounds.leave()
	st := newStream(s, srv.Context())
	defer st.finish()
	rx := newReceiver(srv)
	defer rx.stop()
	for {
		req, err := rx.recv(st.deadline(time.Now()))
		if errors.Is(err, errDeadline) {
			return s.expired(srv, st)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
				return nil
			}
			return status.Errorf(codes.Unknown, "extproc: receive: %v", err)
		}
		resp, err := st.handle(req)
		if err != nil {
			return s.refused(err)
		}
		for ; resp != nil; resp = st.next() {
			if err := srv.Send(resp); err != nil {
				if status.Code(err) == codes.Canceled {
					return nil
				}
				return err
			}
		}
	}
}

// expired ends a stream whose deadline passed (deadline.go).
func (s *Server) expired(srv extprocv3.ExternalProcessor_ProcessServer, st *stream) error {
	s.log.Debug("stream deadline passed", "phase", st.phase, "path", st.path)
	resp := st.expired()
	if resp == nil {
		return errStreamIdle
	}
	if err := srv.Send(resp); err != nil && status.Code(err) != codes.Canceled {
		return err
	}
	return nil
}

// refused is the gRPC status that ends a stream that refused a message.
func (s *Server) refused(err error) error {
	var pe *protocolError
	if !errors.As(err, &pe) {
		return status.Errorf(codes.Internal, "extproc: %v", err)
	}
	s.m.errors.WithLabelValues("protocol_violation").Inc()
	s.log.Debug("ext_proc stream refused", "message", pe.msg, "phase", pe.phase, "code", pe.code())
	return status.Error(pe.code(), pe.Error())
}
