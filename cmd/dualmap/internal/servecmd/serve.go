// Package servecmd is the serve subcommand: the ext_proc routing server,
// with its admin HTTP server, signals and graceful shutdown. It is a
// package of its own so that the router's dependencies can be held apart
// from the other subcommands': it must not link the simulator's plotting
// (see deps_test.go).
package servecmd

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/redis/go-redis/v9"

	"github.com/dualmap/dualmap/cmd/dualmap/internal/cli"
	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/epphealth"
	"github.com/dualmap/dualmap/internal/extproc"
	"github.com/dualmap/dualmap/internal/servetls"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/internal/telemetry"
)

// Run runs `dualmap serve` with args, the arguments after "serve", until
// SIGINT or SIGTERM. A command-line mistake is a cli.ErrUsage.
func Run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (see examples/dualmap.yaml; `dualmap config defaults`)")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "on SIGTERM, how long open streams may finish")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if *path == "" {
		return fmt.Errorf("%w: --config FILE is required", cli.ErrUsage)
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	// go-redis logs every failed dial; route those to debug, the state
	// package reports outages once.
	redis.SetLogger(state.RedisLogger{Logger: log})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, cfg, *path, *grace, log, nil)
}

// grpcOptions bounds the ext_proc server: message sizes for bodies up to
// limits.max_body_bytes plus protobuf framing, and the grpc.* settings;
// tc, when not nil, is the listener's TLS.
func grpcOptions(cfg config.Config, tc *tls.Config) []grpc.ServerOption {
	c := cfg.GRPC
	age, grace := c.MaxConnectionAge, c.MaxConnectionAgeGrace
	if age < 0 {
		age, grace = 0, 0 // grpc-go's zero: never
	}
	var creds []grpc.ServerOption
	if tc != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(tc)))
	}
	return append(creds,
		grpc.MaxRecvMsgSize(cfg.Limits.MaxBodyBytes+(1<<20)),
		grpc.MaxSendMsgSize(cfg.Limits.MaxBodyBytes+(1<<20)),
		grpc.MaxConcurrentStreams(uint32(c.MaxConcurrentStreams)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: c.MinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  c.KeepaliveTime,
			Timeout:               c.KeepaliveTimeout,
			MaxConnectionAge:      age,
			MaxConnectionAgeGrace: grace,
		}),
	)
}

// healthOptions are the plaintext health server's: small messages, few
// streams per connection (a probe makes one at a time; Watch holds one).
func healthOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(4 << 10),
		grpc.MaxConcurrentStreams(16),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(5 * time.Second),
	}
}

// boundAddrs are the bound addresses of a running serve (for tests); health is
// "" when grpc.health is off.
type boundAddrs struct {
	grpc, admin, health string
}

// The admin server's timeouts. The write timeout leaves room for a slow
// scrape of /metrics; nothing the admin server serves streams.
const (
	adminReadHeaderTimeout = 5 * time.Second
	adminReadTimeout       = 10 * time.Second
	adminWriteTimeout      = 30 * time.Second
	adminIdleTimeout       = 2 * time.Minute
)

func newAdminServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: adminReadHeaderTimeout,
		ReadTimeout:       adminReadTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       adminIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// requireToken serves /debug/* only to requests that carry
// "Authorization: Bearer <token>" (compared in constant time) and answers
// 401 to the others; every other path passes. An empty token guards
// nothing.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/") || r.URL.Path == "/debug" {
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="dualmap admin"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the router until ctx ends. ready, if not nil, receives the
// bound addresses once every listener listens (for tests).
func serve(ctx context.Context, cfg config.Config, path string, grace time.Duration, log *slog.Logger, ready chan<- boundAddrs) error {
	// SIGHUP is caught from the start: one that arrives while the router is
	// still starting waits for the loop below instead of ending the process
	// (Go's default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tel, err := telemetry.Setup(ctx, "dualmap", cfg.Tracing, os.Getenv)
	if err != nil {
		return err
	}
	defer shutdownTracing(tel, log)
	if tel.Enabled() {
		log.Info("tracing on", "otlp_endpoint", tel.Endpoint, "protocol", tel.Protocol)
	}
	srv, err := extproc.New(cfg, extproc.Options{Logger: log, Registry: reg, Tracer: tel.Tracer()})
	if err != nil {
		return err
	}
	defer srv.Close()

	tc, err := servetls.ServerConfig(cfg.GRPC.TLS, servetls.Options{Logger: log})
	if err != nil {
		return err
	}
	token, err := cfg.AdminToken(os.Getenv)
	if err != nil {
		return err
	}
	var listeners []net.Listener
	closeAll := func() {
		for _, l := range listeners {
			l.Close()
		}
	}
	listen := func(what, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen %s: %w", what, err)
		}
		listeners = append(listeners, l)
		return l, nil
	}
	gl, err := listen("grpc", cfg.Listen.GRPC)
	if err != nil {
		return err
	}
	al, err := listen("admin", cfg.Listen.Admin)
	if err != nil {
		return err
	}
	var hl net.Listener
	if cfg.GRPC.Health.Enabled {
		if hl, err = listen("grpc.health", cfg.GRPC.Health.Listen); err != nil {
			return err
		}
	}
	// One health service, on the ext_proc listener and on the health port.
	rep := epphealth.New(srv.Readiness, 0, log)
	rep.Follow(epphealth.State, srv.StateSynced, epphealth.State)
	g := grpc.NewServer(grpcOptions(cfg, tc)...)
	srv.Register(g)
	healthpb.RegisterHealthServer(g, rep.Server())
	var hg *grpc.Server
	if hl != nil {
		hg = grpc.NewServer(healthOptions()...)
		healthpb.RegisterHealthServer(hg, rep.Server())
	}
	admin := newAdminServer(requireToken(token, srv.AdminHandler(reg)))

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { srv.Run(runCtx); close(done) }()
	repDone := make(chan struct{})
	go func() { rep.Run(runCtx); close(repDone) }()
	errc := make(chan error, 3)
	go func() { errc <- g.Serve(gl) }()
	if hg != nil {
		go func() { errc <- hg.Serve(hl) }()
	}
	go func() {
		if err := admin.Serve(al); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	bound := boundAddrs{grpc: gl.Addr().String(), admin: al.Addr().String()}
	if hl != nil {
		bound.health = hl.Addr().String()
	}
	log.Info("dualmap serving", "grpc", bound.grpc, "tls", cfg.GRPC.TLS.Mode, "health", bound.health, "admin", bound.admin, "pools", len(cfg.Pools), "state", cfg.State.Backend)
	if ready != nil {
		ready <- bound
	}

	for {
		select {
		case <-hup:
			if path == "" {
				continue
			}
			c, err := config.Load(path)
			if err != nil {
				log.Error("reload: keeping the running configuration", "error", err)
				continue
			}
			srv.Reload(c)
			log.Info("reloaded instance lists", "config", path)
			continue
		case err := <-errc:
			cancel()
			g.Stop()
			if hg != nil {
				hg.Stop()
			}
			admin.Close()
			<-done
			<-repDone
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
		}
		break
	}
	log.Info("shutting down: finishing open streams", "grace", grace)
	// NOT_SERVING everywhere: gateways stop opening streams while the open
	// ones finish.
	rep.Shutdown()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		log.Warn("grace period over; closing the remaining streams")
		g.Stop()
	}
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	admin.Shutdown(shutCtx)
	if hg != nil {
		hg.Stop()
	}
	cancel()
	<-done
	<-repDone
	log.Info("stopped")
	return nil
}

// shutdownTracing flushes the spans still buffered (a few seconds at most).
func shutdownTracing(tel *telemetry.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		log.Warn("tracing: flushing spans at exit", "error", err)
	}
}
