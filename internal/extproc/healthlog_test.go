package extproc

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// The "instance health changed" log says the health the instance changed
// to: healthy=false when its check starts failing, healthy=true when it
// passes again.
func TestHealthChangeLog(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	e := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	defer e.Close()
	addr := strings.TrimPrefix(e.URL, "http://")
	var logs syncBuffer
	cfg := parseConfig(t, "pools: [{instances: [{address: "+addr+"}]}]\nhealth: {backoff: 1ms, max_backoff: 1ms}\n")
	srv, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := srv.pools[0]
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "instance health changed") {
				out = append(out, l)
			}
		}
		return out
	}
	ctx := context.Background()
	srv.checkAll(ctx, p)
	up.Store(false)
	srv.checkAll(ctx, p)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "healthy=false") {
		t.Fatalf("after the check failed: %q, want one line with healthy=false", l)
	}
	up.Store(true)
	waitFor(t, "the instance back", func() bool {
		srv.checkAll(ctx, p)
		return len(lines()) == 2
	})
	if l := lines(); !strings.Contains(l[1], "healthy=true") {
		t.Errorf("after the check passed again: %q, want healthy=true", l[1])
	}
}
