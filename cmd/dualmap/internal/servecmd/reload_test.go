package servecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/config"
)

// syncBuffer is a log sink the test reads while serve writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SIGHUP re-reads the configuration file and applies its instance lists;
// a file that no longer parses is logged and the running lists are kept.
func TestSIGHUPReloadsInstances(t *testing.T) {
	// This process must survive SIGHUP whatever serve has registered yet.
	own := make(chan os.Signal, 1)
	signal.Notify(own, syscall.SIGHUP)
	defer signal.Stop(own)

	engine := func() string {
		e := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		t.Cleanup(e.Close)
		return strings.TrimPrefix(e.URL, "http://")
	}
	a, b := engine(), engine()
	file := func(addrs ...string) string {
		y := "listen: {grpc: \"127.0.0.1:0\", admin: \"127.0.0.1:0\"}\nhealth: {interval: 50ms}\npools:\n  - instances:\n"
		for _, addr := range addrs {
			y += "      - address: " + addr + "\n"
		}
		return y
	}
	path := filepath.Join(t.TempDir(), "dualmap.yaml")
	write := func(y string) {
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file(a))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan boundAddrs, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, cfg, path, 2*time.Second, slog.New(slog.NewTextHandler(&logs, nil)), ready)
	}()
	defer func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("serve() = %v after shutdown", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("serve() did not stop")
		}
	}()
	var admin string
	select {
	case addrs := <-ready:
		admin = addrs.admin
	case err := <-errc:
		t.Fatalf("serve() = %v before ready", err)
	case <-time.After(5 * time.Second):
		t.Fatal("serve() never became ready")
	}
	instances := func() []string {
		resp, err := http.Get("http://" + admin + "/debug/instances")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var pools map[string][]struct{ ID string }
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &pools); err != nil {
			t.Fatalf("/debug/instances: %v in %s", err, body)
		}
		var ids []string
		for _, in := range pools["default"] {
			ids = append(ids, in.ID)
		}
		slices.Sort(ids)
		return ids
	}
	// hup signals until cond holds: serve registers for SIGHUP only after
	// it reports ready, so the first signals may come too early.
	hup := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("after SIGHUP: %s never happened; instances %v; log:\n%s", what, instances(), logs.String())
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := instances(); !slices.Equal(got, []string{a}) {
		t.Fatalf("instances before reload = %v, want [%s]", got, a)
	}

	write(file(a, b))
	want := []string{a, b}
	slices.Sort(want)
	hup("the new instance joining", func() bool { return slices.Equal(instances(), want) })

	write(file(b))
	hup("the removed instance leaving", func() bool { return slices.Equal(instances(), []string{b}) })

	write("pools: [this is not a configuration")
	hup("the reload error being logged", func() bool { return strings.Contains(logs.String(), "keeping the running configuration") })
	if got := instances(); !slices.Equal(got, []string{b}) {
		t.Errorf("instances after a bad file = %v, want the running [%s]", got, b)
	}
}
