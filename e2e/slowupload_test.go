//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Slow full-duplex uploads behind the gateway configuration (Envoy
// streams the body to the router, which holds it): connections from one
// client (127.0.0.2) declare bodies, send all but their last 16 bytes and
// idle. They hold at most the client's share of the body budget, the
// next of them gets 429, another client (127.0.0.1) is served meanwhile,
// and each idle upload gets 408 once limits.body_timeout has passed, its
// bytes given back.
func TestGatewaySlowUploads(t *testing.T) {
	const (
		bodyBytes = 200000
		held      = 2 // uploads the client's share takes
	)
	g := startGateway(t, gatewayOptions{edit: []string{"  max_queue_wait: 30s\n",
		"  max_queue_wait: 30s\n  max_body_bytes: 262144\n  max_buffered_bytes: 1048576\n  max_buffered_bytes_per_client: 450000\n  body_timeout: 3s\n"}})
	router := g.routers[0]
	addr := strings.TrimPrefix(g.url, "http://")
	open := func() (net.Conn, *bufio.Reader) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		prefix := `{"model":"m","messages":[{"role":"user","content":"`
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s%s",
			bodyBytes, prefix, strings.Repeat("x", bodyBytes-16-len(prefix)))
		return c, bufio.NewReader(c)
	}
	type upload struct {
		c      net.Conn
		r      *bufio.Reader
		opened time.Time
	}
	var ups []upload
	defer func() {
		for _, u := range ups {
			u.c.Close()
		}
	}()
	for i := 0; i < held; i++ {
		c, r := open()
		ups = append(ups, upload{c, r, time.Now()})
	}
	waitCond(t, fmt.Sprintf("%d uploads held", held), 10*time.Second, func() bool {
		return routerSeries(t, router, "dualmap_buffered_body_bytes") == float64(held*(bodyBytes-16))
	})
	// One more from the same client is over its share.
	c, r := open()
	ups = append(ups, upload{c, r, time.Now()})
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("upload over the client's share: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("x-llm-d-request-dropped-reason") != "buffer_full" {
		t.Fatalf("upload over the client's share: %d %v, want 429 buffer_full", resp.StatusCode, resp.Header)
	}
	if got := routerSeries(t, router, `dualmap_limit_rejections_total{limit="max_buffered_bytes_per_client"}`); got != 1 {
		t.Errorf("max_buffered_bytes_per_client rejections = %g, want 1", got)
	}
	// Another client is served while they hold.
	if r := g.post("/v1/chat/completions", chatBody("another client", strings.Repeat("y", 100000), false, 4)); r.status != 200 {
		t.Fatalf("another client's request while the uploads held: %v, want 200", r)
	}
	// The idle uploads are cut off at body_timeout.
	for i, u := range ups[:held] {
		u.c.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(u.r, nil)
		if err != nil {
			t.Fatalf("idle upload %d: %v", i, err)
		}
		resp.Body.Close()
		took := time.Since(u.opened)
		if resp.StatusCode != 408 || took < 3*time.Second {
			t.Errorf("idle upload %d: %d after %v, want 408 after limits.body_timeout (3s)", i, resp.StatusCode, took)
		}
		t.Logf("idle upload %d: %d after %v", i, resp.StatusCode, took.Round(time.Millisecond))
	}
	waitCond(t, "the budget given back", 10*time.Second, func() bool {
		return routerSeries(t, router, "dualmap_buffered_body_bytes") == 0 && routerSeries(t, router, "dualmap_buffering_clients") == 0
	})
	if got := routerSeries(t, router, `dualmap_limit_rejections_total{limit="body_timeout"}`); got != held {
		t.Errorf("body_timeout rejections = %g, want %d", got, held)
	}
}

// waitCond waits up to d for cond.
func waitCond(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every shipped Envoy bounds receiving a request (request_timeout, not 0s:
// a stalled upload is cut off even where the router does not hold the
// body), and the full-duplex gateway configurations send the client's
// address the router's per-client share needs.
func TestShippedEnvoyBoundsRequests(t *testing.T) {
	timeout := regexp.MustCompile(`(?m)^\s*request_timeout: (\S+)`)
	files, _ := filepath.Glob(filepath.Join(repoRoot, "envoy", "*.yaml"))
	files = append(files, filepath.Join(repoRoot, "charts", "dualmap", "templates", "envoy.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := timeout.FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			t.Errorf("%s: no request_timeout", f)
		}
		for _, v := range m {
			if d, err := time.ParseDuration(v[1]); err != nil || d <= 0 || d > 5*time.Minute {
				t.Errorf("%s: request_timeout %s, want a bound (0 < it <= 5m)", f, v[1])
			}
		}
	}
	for _, f := range []string{"envoy/gateway-epp.yaml", "envoy/k8s/istio-envoyfilter.yaml"} {
		b, _ := os.ReadFile(filepath.Join(repoRoot, f))
		if !strings.Contains(string(b), "request_attributes: [source.address]") {
			t.Errorf("%s: its ext_proc filter does not send source.address (request_attributes)", f)
		}
	}
	b, _ := os.ReadFile(filepath.Join(repoRoot, "envoy", "k8s", "envoy-gateway-extension-policy.yaml"))
	if !strings.Contains(string(b), "attributes: [source.address]") {
		t.Errorf("the Envoy Gateway example does not send source.address (processingMode.request.attributes)")
	}
}
