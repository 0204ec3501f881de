package servecmd

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/state"
)

// flakyEngine answers its health check 200 or 500 as up says.
func flakyEngine(t *testing.T, up *atomic.Bool) string {
	t.Helper()
	e := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(e.Close)
	return strings.TrimPrefix(e.URL, "http://")
}

func healthClient(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func statusOf(t *testing.T, hc healthpb.HealthClient, svc string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatalf("Check(%q) = %v", svc, err)
	}
	return r.Status
}

// waitStatus polls Check(svc) until it reports want.
func waitStatus(t *testing.T, hc healthpb.HealthClient, svc string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := statusOf(t, hc, svc)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check(%q) = %v, want %v", svc, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The health port answers liveness, readiness, "" and the ext_proc service;
// readiness falls when every instance of one pool fails its health check
// and comes back with them, and Watch sees both changes; the ext_proc
// listener answers the same.
func TestGRPCHealthPort(t *testing.T) {
	var aUp, bUp, cUp atomic.Bool
	aUp.Store(true)
	bUp.Store(true)
	cUp.Store(true)
	a, b, c := flakyEngine(t, &aUp), flakyEngine(t, &bUp), flakyEngine(t, &cUp)
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
grpc: {health: {enabled: true, listen: "127.0.0.1:0"}}
pools:
  - {name: one, models: [m1], instances: [{address: `+a+`}, {address: `+b+`}]}
  - {name: two, models: ["*"], instances: [{address: `+c+`}]}
health: {interval: 50ms, timeout: 500ms, backoff: 100ms, max_backoff: 200ms}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := startServe(t, cfg)
	if addrs.health == "" || addrs.health == addrs.grpc {
		t.Fatalf("health address %q (grpc %q), want a port of its own", addrs.health, addrs.grpc)
	}
	hc := healthClient(t, addrs.health)
	readiness := []string{"readiness", "", "envoy.service.ext_proc.v3.ExternalProcessor"}
	for _, svc := range readiness {
		waitStatus(t, hc, svc, healthpb.HealthCheckResponse_SERVING)
	}
	if got := statusOf(t, hc, "liveness"); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness = %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "readiness"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first = %v, %v", r, err)
	}

	aUp.Store(false) // one of pool one's two: still ready
	time.Sleep(300 * time.Millisecond)
	if got := statusOf(t, hc, "readiness"); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("readiness with one of two instances down = %v, want SERVING", got)
	}
	bUp.Store(false) // all of pool one
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after pool one lost every instance = %v, %v; want NOT_SERVING", r, err)
	}
	for _, svc := range readiness {
		if got := statusOf(t, hc, svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("%q = %v with pool one down, want NOT_SERVING", svc, got)
		}
	}
	if got := statusOf(t, hc, "liveness"); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness = %v with pool one down, want SERVING", got)
	}
	if got := statusOf(t, healthClient(t, addrs.grpc), "readiness"); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("readiness on the ext_proc listener = %v, want NOT_SERVING too", got)
	}
	bUp.Store(true)
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch after an instance came back = %v, %v; want SERVING", r, err)
	}
	for _, svc := range readiness {
		waitStatus(t, hc, svc, healthpb.HealthCheckResponse_SERVING)
	}
}

// With Redis state, readiness does not wait for Redis: a replica routes
// on its own view while Redis is unreachable (a gateway that fails closed
// must keep sending it requests). The outage shows in the dualmap.state
// service, NOT_SERVING, and in /readyz's 200 answer.
func TestGRPCHealthWithoutRedis(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	e := flakyEngine(t, &up)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
grpc: {health: {enabled: true, listen: "127.0.0.1:0"}}
pools: [{instances: [{address: `+e+`}]}]
health: {interval: 50ms}
state: {backend: redis, redis: {addrs: ["`+dead+`"]}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	redis.SetLogger(state.RedisLogger{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	addrs := startServe(t, cfg)
	hc := healthClient(t, addrs.health)
	for _, svc := range []string{"readiness", "", "envoy.service.ext_proc.v3.ExternalProcessor", "liveness"} {
		waitStatus(t, hc, svc, healthpb.HealthCheckResponse_SERVING)
	}
	waitStatus(t, hc, "dualmap.state", healthpb.HealthCheckResponse_NOT_SERVING)
	resp, err := http.Get("http://" + addrs.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "degraded: pool default: shared state not synced") {
		t.Errorf("/readyz with Redis unreachable = %d %q, want 200 with a degraded line", resp.StatusCode, b)
	}
}

// grpc.tls self-signed: a gateway-style client (TLS, no verification)
// reaches the ext_proc listener; a plaintext client does not.
func TestServeSelfSignedTLS(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	e := flakyEngine(t, &up)
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
grpc: {tls: {mode: self-signed}}
pools: [{instances: [{address: `+e+`}]}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := startServe(t, cfg)
	conn, err := grpc.NewClient(addrs.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := statusOf(t, healthpb.NewHealthClient(conn), "liveness"); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness over TLS = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := healthClient(t, addrs.grpc).Check(ctx, &healthpb.HealthCheckRequest{Service: "liveness"}); err == nil {
		t.Error("a plaintext client was served by the TLS listener")
	}
}
