//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The requests below go through Envoy configured as Envoy AI Gateway
// configures an EPP (envoy/gateway-epp.yaml: full-duplex streamed bodies
// both ways with trailers, TLS, ORIGINAL_DST) to dualmap configured as
// examples/gateway-epp.yaml.

// routerSeries sums the values of every series of the router's /metrics
// whose name (labels included) starts with prefix.
func routerSeries(t *testing.T, r *routerProc, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// Requests sharing a long prefix land on one instance, which serves the
// later ones from its prefix cache; unrelated prefixes spread.
func TestGatewayAffinity(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	first := g.post("/v1/chat/completions", chatBody("affinity "+systemPrompt, "question 0", false, 4))
	if first.status != 200 || first.engine == "" {
		t.Fatalf("first request: %v", first)
	}
	cached := 0
	for i := 1; i < 8; i++ {
		r := g.post("/v1/chat/completions", chatBody("affinity "+systemPrompt, fmt.Sprintf("question %d", i), false, 4))
		if r.status != 200 || r.engine != first.engine {
			t.Fatalf("request %d with the same prefix: %v, want served by %s", i, r, first.engine)
		}
		if r.cached > 0 {
			cached++
		}
	}
	if cached < 6 {
		t.Errorf("%d of 7 repeats were served from the prefix cache, want at least 6", cached)
	}
	served := map[string]int{}
	for i := 0; i < 24; i++ {
		r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("tenant %d %s", i, systemPrompt), "hi", false, 4))
		if r.status != 200 {
			t.Fatalf("spread request %d: %v", i, r)
		}
		served[r.engine]++
	}
	if len(served) < 3 {
		t.Errorf("24 unrelated prefixes went to %d instances (%v), want at least 3", len(served), served)
	}
	t.Logf("same prefix: 8 of 8 on %s, %d of 7 repeats cached; unrelated prefixes: %v", first.engine, cached, served)
}

// A 1 MB body goes through Envoy and dualmap in full-duplex mode and the
// engine receives exactly the client's bytes.
func TestGatewayLargeBodyIntact(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	var content strings.Builder
	for i := 0; content.Len() < 1<<20; i++ {
		fmt.Fprintf(&content, "line %d of a long document with varied text %x. ", i, i*7919)
	}
	body := chatBody("large "+systemPrompt, content.String(), false, 4)
	if len(body) < 1<<20 {
		t.Fatalf("body %d bytes, want at least 1 MiB", len(body))
	}
	sum := sha256.Sum256(body)
	for _, stream := range []bool{false, true} {
		b := body
		if stream {
			b = chatBody("large "+systemPrompt, content.String(), true, 4)
			sum = sha256.Sum256(b)
		}
		r := g.post("/v1/chat/completions", b)
		if r.status != 200 {
			t.Fatalf("%d-byte body (stream %v): %v", len(b), stream, r)
		}
		if got, want := r.header.Get("x-engine-body-sha256"), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("stream %v: the engine received a body with SHA-256 %s (%s bytes), the client sent %s (%d bytes)",
				stream, got, r.header.Get("x-engine-body-bytes"), want, len(b))
		}
		if got := r.header.Get("x-engine-body-bytes"); got != strconv.Itoa(len(b)) {
			t.Errorf("stream %v: the engine received %s bytes, the client sent %d", stream, got, len(b))
		}
		t.Logf("stream %v: %d bytes sent, engine %s received %s bytes, SHA-256 equal", stream, len(b), r.engine, r.header.Get("x-engine-body-bytes"))
	}
}

// A streamed response reaches the client chunk by chunk, and the router's
// first-token measurement (from the response headers it sees in duplex
// mode) is no later than what the client saw.
func TestGatewayStreamingTTFT(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	router := g.routers[0]
	before := routerSeries(t, router, "dualmap_first_byte_seconds_count")
	beforeSum := routerSeries(t, router, "dualmap_first_byte_seconds_sum")
	body := chatBody("stream "+systemPrompt, "tell me a story", true, 64)
	req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("streaming request: %d %s %q", resp.StatusCode, resp.Header.Get("content-type"), b)
	}
	var ttft time.Duration
	events, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if ttft == 0 {
			ttft = time.Since(start)
		}
		if line == "data: [DONE]" {
			done = true
			continue
		}
		events++
	}
	total := time.Since(start)
	if !done || events < 10 {
		t.Fatalf("stream: %d events, [DONE] %v; want the whole stream", events, done)
	}
	deadline := time.Now().Add(faultWait)
	for routerSeries(t, router, "dualmap_first_byte_seconds_count") < before+1 {
		if time.Now().After(deadline) {
			t.Fatal("the router recorded no first byte for the stream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	routerTTFT := time.Duration((routerSeries(t, router, "dualmap_first_byte_seconds_sum") - beforeSum) * float64(time.Second))
	if routerTTFT <= 0 || routerTTFT > ttft {
		t.Errorf("router's first byte %v, client's first event %v: want 0 < router <= client", routerTTFT, ttft)
	}
	if routerTTFT >= total {
		t.Errorf("router's first byte %v is not before the stream's end %v", routerTTFT, total)
	}
	t.Logf("stream of %d events in %v: client TTFT %v, router's first byte %v", events, total.Round(time.Millisecond), ttft.Round(time.Millisecond), routerTTFT.Round(time.Millisecond))
}

// Over limits.max_streams the client gets the router's 429 through the
// gateway; with no instance ready, 503.
func TestGatewayShedding(t *testing.T) {
	g := startGateway(t, gatewayOptions{edit: []string{"  max_queue_wait: 30s\n", "  max_queue_wait: 30s\n  max_streams: 2\n"}})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	}
	deadline := time.Now().Add(faultWait)
	for routerGauge(t, g.routers[0], "dualmap_streams") != "2" {
		if time.Now().After(deadline) {
			t.Fatalf("dualmap_streams = %q, want 2", routerGauge(t, g.routers[0], "dualmap_streams"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := g.post("/v1/chat/completions", chatBody("over the cap", "hi", false, 4))
	if r.status != 429 || r.header.Get("retry-after") == "" {
		t.Fatalf("over the cap: %v (retry-after %q), want 429 with Retry-After", r, r.header.Get("retry-after"))
	}
	if r.header.Get("x-llm-d-request-dropped-reason") == "" {
		t.Errorf("429 without x-llm-d-request-dropped-reason; headers %v", r.header)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	t.Logf("over max_streams: %d %s (dropped reason %q)", r.status, bytes.TrimSpace(r.body), r.header.Get("x-llm-d-request-dropped-reason"))

	for _, e := range g.engines {
		e.killNow()
	}
	deadline = time.Now().Add(faultWait)
	for {
		// Until the router's health checks see the deaths, Envoy's own
		// 503 (connect failure) comes back; then the router's.
		r = g.post("/v1/chat/completions", chatBody("nobody home", "hi", false, 4))
		if r.status == 503 && strings.Contains(string(r.body), `"no_healthy_upstream"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with every instance dead: %v, want the router's 503 no_healthy_upstream", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.header.Get("x-llm-d-request-dropped-reason") == "" {
		t.Errorf("503 without x-llm-d-request-dropped-reason; headers %v", r.header)
	}
	t.Logf("every instance dead: %d %s (dropped reason %q)", r.status, bytes.TrimSpace(r.body), r.header.Get("x-llm-d-request-dropped-reason"))
}

// A client's own x-gateway-destination-endpoint is ignored: the request is
// served by the router's choice and the address it named gets no
// connection.
func TestGatewaySpoofedDestination(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tr := newTrap(t)
	for i := 0; i < 10; i++ {
		r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("spoof %d %s", i, systemPrompt), "hi", i%2 == 0, 4),
			"x-gateway-destination-endpoint", tr.addr())
		dest := r.header.Get("x-engine-destination")
		if r.status != 200 || r.engine == "" || dest != r.engine {
			t.Fatalf("request %d naming %s: %v (engine saw destination %q), want served by the router's one choice", i, tr.addr(), r, dest)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := tr.count.Load(); n != 0 {
		t.Errorf("the address the client named got %d connections, want 0", n)
	}
}

// The gateway's subset hint (x-llm-zone: a sets envoy.lb.subset_hint to
// the first two engines in envoy/gateway-epp.yaml) is honoured: every
// request of that route lands inside it, whatever its prefix.
func TestGatewaySubsetHint(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	subset := map[string]bool{g.engines[0].addr: true, g.engines[1].addr: true}
	served := map[string]int{}
	for i := 0; i < 24; i++ {
		r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("zone %d %s", i, systemPrompt), "hi", false, 4), "x-llm-zone", "a")
		if r.status != 200 {
			t.Fatalf("request %d in zone a: %v", i, r)
		}
		served[r.engine]++
	}
	for e := range served {
		if !subset[e] {
			t.Errorf("zone a requests served by %v, want only the subset %s, %s", served, g.engines[0].addr, g.engines[1].addr)
			break
		}
	}
	t.Logf("24 zone-a requests: %v", served)
}

// routerSeriesWith sums the series of name whose labels contain label.
func routerSeriesWith(t *testing.T, r *routerProc, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// The served endpoint the gateway reports (envoy.lb /
// x-gateway-destination-endpoint-served, forwarded on the response path)
// is what the router's failure accounting charges. To tell it from the
// router's own pick, this gateway reports a fixed other instance as the
// one that served: the 500 of the instance that really answered is
// charged to the reported one. (The router also charges its pick, which
// by the report did not serve: as when Envoy retries on a fallback.)
func TestGatewayServedEndpointFeedsBack(t *testing.T) {
	var reported string
	g := startGateway(t, gatewayOptions{envoyEdit: func(s *stack) []string {
		reported = s.engines[3].addr
		return []string{`value: "%UPSTREAM_HOST%"`, fmt.Sprintf("value: %q", reported)}
	}})
	failing := g.engines[0].addr
	resp, err := client.Post("http://"+failing+"/admin/fault", "application/json", strings.NewReader(`{"error_rate":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("fault on %s: status %d", failing, resp.StatusCode)
	}
	router := g.routers[0]
	fails := 0
	for i := 0; i < 64 && fails == 0; i++ {
		r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("served %d %s", i, systemPrompt), "hi", false, 4))
		if r.engine == failing && r.status == 500 {
			fails++
		}
	}
	if fails == 0 {
		t.Fatalf("no request reached %s in 64 tries", failing)
	}
	deadline := time.Now().Add(faultWait)
	for routerSeriesWith(t, router, "dualmap_upstream_errors_total", `instance="`+reported+`"`) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("upstream errors charged to the reported %s: %v, to the picked %s: %v; want the reported one charged",
				reported, routerSeriesWith(t, router, "dualmap_upstream_errors_total", `instance="`+reported+`"`),
				failing, routerSeriesWith(t, router, "dualmap_upstream_errors_total", `instance="`+failing+`"`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a 500 from %s reported as served by %s: %v failure(s) charged to the reported one, %v to the pick",
		failing, reported, routerSeriesWith(t, router, "dualmap_upstream_errors_total", `instance="`+reported+`"`),
		routerSeriesWith(t, router, "dualmap_upstream_errors_total", `instance="`+failing+`"`))
}
