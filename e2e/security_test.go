//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// trap is a loopback listener that counts the connections it accepts: an
// address a hostile client names, which nothing may ever connect to.
type trap struct {
	ln    net.Listener
	count atomic.Int64
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.count.Add(1)
			c.Close()
		}
	}()
	return tr
}

func (tr *trap) addr() string { return tr.ln.Addr().String() }

// The Envoy examples never let a client pick the upstream: neither on
// /health (where ext_proc is off, so nothing overwrites the destination
// header) nor on a path outside the allow-list, and only the allow-listed
// paths reach an instance at all.
func TestClientCannotChooseTheDestination(t *testing.T) {
	for _, tt := range []struct{ name, envoy, mode string }{
		{"override-host", "front-proxy.yaml", ""},
		{"original-dst", "original-dst.yaml", "original-dst"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startStack(t, stackOptions{engines: 2, envoyConfig: tt.envoy, mode: tt.mode})
			tr := newTrap(t)
			// The trap counts: a connection made on purpose is seen.
			c, err := net.Dial("tcp", tr.addr())
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			waitFor(t, func() bool { return tr.count.Load() == 1 })
			tr.count.Store(0)

			requests := []struct {
				method, path string
				want         int
			}{
				{"GET", "/health", 200},
				{"GET", "/metrics", 404},
				{"GET", "/admin", 404},
				{"POST", "/v1/load_lora_adapter", 404},
				{"GET", "/v1/models/../../metrics", 404},
				{"POST", "/v1/chat/completions/x", 404},
				{"GET", "/v1/models", 200},
			}
			for _, r := range requests {
				req, _ := http.NewRequest(r.method, s.url+r.path, strings.NewReader(`{}`))
				req.Header.Set("content-type", "application/json")
				req.Header.Set("x-gateway-destination-endpoint", tr.addr())
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", r.method, r.path, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != r.want {
					t.Errorf("%s %s = %d %q, want %d", r.method, r.path, resp.StatusCode, body, r.want)
				}
			}
			// An inference request with the header is served by the
			// router's choice.
			rep := s.post("/v1/chat/completions", chatBody("system", "hi", false, 4), "x-gateway-destination-endpoint", tr.addr())
			if rep.status != 200 || rep.engine == "" || rep.engine != rep.instance {
				t.Errorf("chat with a client destination header: %v, want 200 served by the router's choice", rep)
			}
			time.Sleep(200 * time.Millisecond) // a late connection would show
			if n := tr.count.Load(); n != 0 {
				t.Errorf("the address a client named got %d connections, want 0", n)
			}
		})
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(faultWait); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
