package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/pool"
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
	// Wrap, when set, wraps each pool's scheduler (pool.Options.Wrap):
	// tests put spies and fakes there.
	Wrap func(pool.Scheduler) pool.Scheduler
}

// Server is the ext_proc service. Create it with New, register it on a
// gRPC server with Register, start its pools' background work with Run.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg    config.Config
	log    *slog.Logger
	m      *metrics
	pools  *pool.Manager
	bounds *bounds
	tracer trace.Tracer // nil: tracing off

	rm *routeMetrics // route settings (routesettings.go)
	// strip are the request headers removed in the headers phase: the
	// destination and every pool's P/D header (pdHeaders, pd.go).
	strip     []string
	pdHeaders []string
	routeLog  routeLog
}

// New builds the pools of cfg (package pool: tokenizers, schedulers,
// shared state) and the protocol's metrics.
func New(cfg config.Config, opt Options) (*Server, error) {
	s := &Server{cfg: cfg, log: opt.Logger, tracer: opt.Tracer, pdHeaders: pdHeaders(cfg)}
	s.strip = append([]string{cfg.Routing.Header}, s.pdHeaders...)
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.m = newMetrics(opt.Registry)
	s.rm = newRouteMetrics(opt.Registry)
	s.bounds = &bounds{maxStreams: int64(cfg.Limits.MaxStreams), maxBuffered: int64(cfg.Limits.MaxBufferedBytes),
		maxPerClient: int64(cfg.Limits.MaxBufferedBytesPerClient)}
	registerBounds(opt.Registry, s.bounds)
	pools, err := pool.New(cfg, pool.Options{
		Logger: s.log, Registry: opt.Registry, HTTPClient: opt.HTTPClient, Now: opt.Now, TickInterval: opt.TickInterval,
		Getenv: opt.Getenv, Replica: opt.Replica, Wrap: opt.Wrap,
		Panicked: func(string) { s.m.errors.WithLabelValues("panic").Inc() },
	})
	if err != nil {
		return nil, fmt.Errorf("extproc: %w", err)
	}
	s.pools = pools
	pools.OnGone(s.m.forget)
	for _, p := range pools.Pools() {
		s.m.initPool(p.Name())
	}
	return s, nil
}

// Register adds the ext_proc service to g.
func (s *Server) Register(g *grpc.Server) { extprocv3.RegisterExternalProcessorServer(g, s) }

// Pools are the pools the server routes for.
func (s *Server) Pools() *pool.Manager { return s.pools }

// Close releases the pools. Call it after Run has returned.
func (s *Server) Close() { s.pools.Close() }

// Ready reports whether every pool can serve (pool.Manager.Ready).
func (s *Server) Ready() error { return s.pools.Ready() }

// Readiness is what a gateway's readiness check asks (pool.Manager.Readiness).
func (s *Server) Readiness() error { return s.pools.Readiness() }

// StateSynced reports whether the pools' shared state is synced
// (pool.Manager.StateSynced).
func (s *Server) StateSynced() error { return s.pools.StateSynced() }

// Run does the pools' background work until ctx ends (pool.Manager.Run).
func (s *Server) Run(ctx context.Context) { s.pools.Run(ctx) }

// Reload applies the instance lists of a new configuration
// (pool.Manager.Reload).
func (s *Server) Reload(c config.Config) { s.pools.Reload(c) }

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
