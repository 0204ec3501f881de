package servecmd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dualmap/dualmap/internal/config"
)

func TestAdminTokenGuardsDebugOnly(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer engine.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
admin: {token_file: `+tokenFile+`}
pools:
  - instances: [{address: `+strings.TrimPrefix(engine.URL, "http://")+`}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := startServe(t, cfg)
	tests := []struct {
		name, path, auth string
		want             int
	}{
		{"debug without token", "/debug/instances", "", http.StatusUnauthorized},
		{"debug with a wrong token", "/debug/instances", "Bearer s3cre", http.StatusUnauthorized},
		{"debug with the token, not bearer", "/debug/instances", "s3cret", http.StatusUnauthorized},
		{"debug with the token", "/debug/instances", "Bearer s3cret", http.StatusOK},
		{"metrics stay open", "/metrics", "", http.StatusOK},
		{"healthz stays open", "/healthz", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+addrs.admin+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}

func TestAdminServerHasTimeouts(t *testing.T) {
	s := newAdminServer(http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("admin server timeouts = %v %v %v %v, want all set", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}

// grpc.max_concurrent_streams reaches the server: with a cap of one, a
// second stream on the connection waits while a first one is open.
func TestGRPCStreamCap(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer engine.Close()
	cfg, err := config.Parse([]byte(`
listen: {grpc: "127.0.0.1:0", admin: "127.0.0.1:0"}
grpc: {max_concurrent_streams: 1}
pools:
  - instances: [{address: `+strings.TrimPrefix(engine.URL, "http://")+`}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := startServe(t, cfg)
	conn, err := grpc.NewClient(addrs.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	check := func() error {
		c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := hc.Check(c, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(); err != nil {
		t.Fatalf("Check() with no stream open = %v", err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the stream is open
		t.Fatal(err)
	}
	if err := check(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Check() beside an open stream = %v, want DeadlineExceeded (capped at 1 stream)", err)
	}
	wcancel()
	deadline := time.Now().Add(5 * time.Second)
	for check() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Check() still failing after the open stream ended")
		}
	}
}

// startServe runs serve with cfg until the test ends and returns its gRPC
// and admin addresses once it is ready.
func startServe(t *testing.T, cfg config.Config) boundAddrs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan boundAddrs, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, cfg, "", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), ready)
	}()
	t.Cleanup(func() { cancel(); <-errc })
	select {
	case addrs := <-ready:
		return addrs
	case err := <-errc:
		t.Fatalf("serve() = %v before ready", err)
	}
	return boundAddrs{}
}
