//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// h2c is a client that speaks HTTP/2 in cleartext (prior knowledge) to the
// front proxies' listeners, as gRPC-style and HTTP/2 clients do.
var h2c = func() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{}}}
}()

// postTrailers posts body over HTTP/2 followed by a trailer, so that the
// request ends with a HEADERS frame, not with END_STREAM on its last DATA
// frame.
func postTrailers(t *testing.T, url string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, io.NopCloser(bytes.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Trailer = http.Header{"X-Checksum": {"abc"}}
	resp, err := h2c.Do(req)
	if err != nil {
		t.Fatalf("POST with trailers: %v", err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("POST with trailers went over %s, want HTTP/2", resp.Proto)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// A request body that ends with trailers is routed like any other, or
// refused with 400, through every shipped Envoy configuration the suite
// runs; never forwarded unrouted (Envoy's own balancing). Each stack's
// router counts one decision per request and the requests sharing a
// prefix land on one instance.
func TestRequestTrailersAreRouted(t *testing.T) {
	type target struct {
		url     string
		routers []*routerProc
	}
	configs := []struct {
		name  string
		start func(t *testing.T) target
	}{
		{"front-proxy", func(t *testing.T) target {
			s := startStack(t, stackOptions{})
			return target{s.url, s.routers}
		}},
		{"front-proxy-xds", func(t *testing.T) target {
			x := startXDS(t, "envoy-front", "dualmap")
			s := startStack(t, stackOptions{
				envoyConfig:   "front-proxy-xds.yaml",
				beforeRouters: func(addrs []string) { x.set(t, addrs...) },
				pools: func([]string) string {
					return fmt.Sprintf("pools:\n  - block_size: 16\n    xds: {address: \"127.0.0.1:%d\", cluster: model_servers, api: eds, node_id: dualmap, grace: 2s}\n", x.port)
				},
				renderEnvoy: func(c string) string {
					return strings.ReplaceAll(c, "port_value: 18000", fmt.Sprintf("port_value: %d", x.port))
				},
			})
			waitCond(t, "the xDS endpoints in the router", 20*time.Second, func() bool {
				return routerSeries(t, s.routers[0], "dualmap_instance_healthy") == 4
			})
			return target{s.url, s.routers}
		}},
		{"sidecar", func(t *testing.T) target {
			// The model servers from DNS in a cluster; here the engines'
			// loopback addresses under the same STRICT_DNS cluster.
			var engines []string
			s := startStack(t, stackOptions{
				envoyConfig:   "sidecar.yaml",
				beforeRouters: func(addrs []string) { engines = addrs },
				renderEnvoy: func(c string) string {
					var b strings.Builder
					for _, a := range engines {
						host, port, _ := strings.Cut(a, ":")
						fmt.Fprintf(&b, "        - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", host, port)
					}
					return replaceOnce(t, "envoy/sidecar.yaml", c,
						"        - endpoint: {address: {socket_address: {address: vllm-headless.llm.svc.cluster.local, port_value: 8000}}}\n", b.String())
				},
			})
			return target{s.url, s.routers}
		}},
		{"gateway-epp", func(t *testing.T) target {
			g := startGateway(t, gatewayOptions{})
			return target{g.url, g.routers}
		}},
	}
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			tg := tt.start(t)
			decisions := func() float64 {
				sum := 0.0
				for _, r := range tg.routers {
					sum += routerSeries(t, r, "dualmap_decisions_total")
				}
				return sum
			}
			before := decisions()
			const n = 8
			served := map[string]int{}
			prefix := strings.Repeat("a shared system prompt for the trailers test. ", 40)
			for i := 0; i < n; i++ {
				code, h, b := postTrailers(t, tg.url+"/v1/chat/completions", chatBody(prefix, "question "+string(rune('a'+i)), false, 4))
				if code != 200 {
					t.Fatalf("request %d with trailers: %d %.200s, want 200", i, code, b)
				}
				served[h.Get("x-engine-name")]++
			}
			if got := decisions() - before; got != n {
				t.Errorf("router decisions for %d requests with trailers = %g, want %d (unrouted requests were forwarded)", n, got, n)
			}
			if len(served) != 1 {
				t.Errorf("requests sharing a prefix served by %v, want one instance", served)
			}
		})
	}
}
