//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAddedLatencyReport measures what the router adds: Envoy + ext_proc
// (dualmap) against Envoy alone (round robin) in front of the same engines
// answering at once (time scale 1e6), at 100 and 500 requests/s, and the
// most requests/s 64 closed-loop clients get through each. A report, not a
// pass/fail test: it runs only with DUALMAP_BENCH_E2E=1 (make bench-e2e).
func TestAddedLatencyReport(t *testing.T) {
	if os.Getenv("DUALMAP_BENCH_E2E") == "" {
		t.Skip("set DUALMAP_BENCH_E2E=1 (make bench-e2e) to measure")
	}
	s := startStack(t, stackOptions{timeScale: 1e6})
	plainURL := startPlainEnvoy(t, s)
	body := chatBody(systemPrompt, "hi", false, 1)
	type row struct {
		name     string
		p50, p99 time.Duration
		rps      float64
		failed   int64
	}
	var rows []row
	for _, target := range []struct{ name, url string }{{"envoy + dualmap", s.url}, {"envoy alone (round robin)", plainURL}} {
		for _, rate := range []int{100, 500} {
			lat, failed := openLoop(target.url, body, rate, 3*time.Second)
			rows = append(rows, row{name: fmt.Sprintf("%s @ %d req/s", target.name, rate), p50: q(lat, 0.5), p99: q(lat, 0.99), failed: failed})
		}
		rps, lat, failed := closedLoop(target.url, body, 64, 3*time.Second)
		rows = append(rows, row{name: target.name + " max", p50: q(lat, 0.5), p99: q(lat, 0.99), rps: rps, failed: failed})
	}
	for _, r := range rows {
		t.Logf("%-42s p50 %8v  p99 %8v  %s failed %d", r.name, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond),
			map[bool]string{true: fmt.Sprintf("%7.0f req/s", r.rps), false: "             "}[r.rps > 0], r.failed)
	}
}

func q(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[int(p*float64(len(lat)-1))]
}

func openLoop(url string, body []byte, rate int, d time.Duration) ([]time.Duration, int64) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			r := (&stack{url: url}).post("/v1/chat/completions", body)
			if r.status != 200 {
				failed.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, failed.Load()
}

func closedLoop(url string, body []byte, workers int, d time.Duration) (float64, []time.Duration, int64) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				r := (&stack{url: url}).post("/v1/chat/completions", body)
				if r.status != 200 {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(len(lat)) / d.Seconds(), lat, failed.Load()
}

// startPlainEnvoy runs a second Envoy that round-robins over the stack's
// engines without ext_proc.
func startPlainEnvoy(t *testing.T, s *stack) string {
	listen, admin := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`admin: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
static_resources:
  listeners:
  - name: plain
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: plain
          route_config: {virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: engines, timeout: 0s}}]}]}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: engines
    type: STATIC
    lb_policy: ROUND_ROBIN
    circuit_breakers: {thresholds: [{max_connections: 100000, max_pending_requests: 100000, max_requests: 100000}]}
    load_assignment:
      cluster_name: engines
      endpoints:
      - lb_endpoints:
`, admin, listen)
	for _, e := range s.engines {
		host, port := splitAddr(e.addr)
		cfg += fmt.Sprintf("        - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", host, port)
	}
	path := filepath.Join(s.dir, "plain-envoy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, s.dir, "plain-envoy", envoyBin, "-c", path, "--log-level", "warn", "--base-id", fmt.Sprint(listen), "--disable-hot-restart")
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/ready", admin), 30*time.Second)
	return fmt.Sprintf("http://127.0.0.1:%d", listen)
}

func splitAddr(a string) (string, string) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:]
		}
	}
	return a, ""
}
