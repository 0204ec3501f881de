package servecmd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dualmap/dualmap/internal/config"
)

func TestServeEndToEndLifecycle(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer engine.Close()
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
pools:
  - instances: [{address: `+strings.TrimPrefix(engine.URL, "http://")+`}]
health: {interval: 50ms}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan boundAddrs, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, cfg, "", 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), ready)
	}()
	var addrs boundAddrs
	select {
	case addrs = <-ready:
	case err := <-errc:
		t.Fatalf("serve() = %v before ready", err)
	case <-time.After(5 * time.Second):
		t.Fatal("serve() never became ready")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addrs.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get("/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "dualmap_instance_healthy") && !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, missing series", code)
	}
	conn, err := grpc.NewClient(addrs.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ext_proc.v3.ExternalProcessor"})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc health = %v, %v", hc, err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("serve() = %v after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve() did not stop")
	}
}
