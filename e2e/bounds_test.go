//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// routerGauge reads one unlabelled series from the router's /metrics.
func routerGauge(t *testing.T, r *routerProc, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// Over limits.max_streams the client gets the router's 429 through Envoy
// (failure_mode_allow: false, as in envoy/front-proxy.yaml), and once the
// streams holding the cap end, requests are served again.
func TestStreamCapThroughEnvoy(t *testing.T) {
	const maxStreams = 2
	s := startStack(t, stackOptions{extraConfig: fmt.Sprintf("limits: {max_streams: %d}\n", maxStreams)})
	router := s.routers[0]
	// Clients that send their headers and a byte of a 1000-byte body, then
	// nothing: Envoy buffers the body, and its ext_proc stream stays open.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < maxStreams; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	}
	deadline := time.Now().Add(faultWait)
	for routerGauge(t, router, "dualmap_streams") != fmt.Sprint(maxStreams) {
		if time.Now().After(deadline) {
			t.Fatalf("dualmap_streams = %q, want %d", routerGauge(t, router, "dualmap_streams"), maxStreams)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := s.post("/v1/chat/completions", chatBody("over the cap", "hi", false, 4))
	if r.status != 429 || !strings.Contains(string(r.body), `"too_many_streams"`) || r.header.Get("retry-after") == "" {
		t.Fatalf("request over the cap: %d %q (retry-after %q), want 429 too_many_streams with Retry-After",
			r.status, r.body, r.header.Get("retry-after"))
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	deadline = time.Now().Add(faultWait)
	for routerGauge(t, router, "dualmap_streams") != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("dualmap_streams = %q after the clients left, want 0", routerGauge(t, router, "dualmap_streams"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := s.post("/v1/chat/completions", chatBody("under the cap", "hi", false, 4)); r.status != 200 {
		t.Fatalf("request after the clients left: %d %q, want 200", r.status, r.body)
	}
	if got := routerGauge(t, router, `dualmap_limit_rejections_total{limit="max_streams"}`); got != "1" {
		t.Errorf("max_streams rejections = %q, want 1", got)
	}
}
