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
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, cfg, "", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), ready)
	}()
	defer func() { cancel(); <-errc }()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case err := <-errc:
		t.Fatalf("serve() = %v before ready", err)
	}
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
			req, _ := http.NewRequest("GET", "http://"+addrs[1]+tt.path, nil)
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
