//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestAddedLatencyReport measures what the router adds through a real
// Envoy: ext_proc with FULL_DUPLEX_STREAMED bodies (the gateway mode), with
// BUFFERED bodies (our front proxy's), and Envoy alone (round robin, no
// ext_proc), all three in front of the same engines answering at once
// (time scale 1e6), one router behind both ext_proc Envoys. For 2 KB and
// 200 KB prompts, each request's body different from the first token (equal
// bodies would all go to one instance), it reports p50/p99 latency at 100
// and 500 requests/s (open loop), what that adds over Envoy alone in the
// same round, and the most requests/s 64 closed-loop clients get through.
// DUALMAP_BENCH_ROUNDS rounds (default 2) interleave the configurations so
// that a machine whose load changes affects all of them alike. A report,
// not a pass/fail test: it runs only with DUALMAP_BENCH_E2E=1 (make
// bench-e2e).
func TestAddedLatencyReport(t *testing.T) {
	if os.Getenv("DUALMAP_BENCH_E2E") == "" {
		t.Skip("set DUALMAP_BENCH_E2E=1 (make bench-e2e) to measure")
	}
	rounds := 2
	if v := os.Getenv("DUALMAP_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DUALMAP_BENCH_ROUNDS=%q: want a positive integer", v)
		}
		rounds = n
	}
	phase := 3 * time.Second
	s := startStack(t, stackOptions{timeScale: 1e6})
	duplexURL, duplexEnvoy := startFrontProxy(t, s, "duplex-envoy", fullDuplex)
	plainURL, plainEnvoy := startPlainEnvoy(t, s)
	router := s.routers[0].cmd.Process.Pid
	targets := []struct {
		name          string
		url           string
		envoy, router int // pids whose CPU is counted, 0 for none
	}{
		{"envoy alone", plainURL, plainEnvoy.cmd.Process.Pid, 0},
		{"buffered", s.url, s.envoy.cmd.Process.Pid, router},
		{"full duplex", duplexURL, duplexEnvoy.cmd.Process.Pid, router},
	}
	t.Logf("%d CPUs; phases of %v in 1 s slices taken in turn; latency in ms; +p50/+p99: over Envoy alone at the same rate in the same round; CPU: ms of utime+stime per request (Envoy; the router)", runtime.NumCPU(), phase)
	for round := 1; round <= rounds; round++ {
		for si, size := range []int{2 << 10, 200 << 10} {
			gen := newBodyGen(t, size, uint64(round*10+si))
			// Warm connections and the engines' code paths.
			closedLoopGen(plainURL, gen, 8, 300*time.Millisecond)
			closedLoopGen(s.url, gen, 8, 300*time.Millisecond)
			closedLoopGen(duplexURL, gen, 8, 300*time.Millisecond)
			t.Logf("round %d, %d KB prompts (%d-byte bodies), load average %s", round, size>>10, len(gen.tmpl), loadAvg())
			t.Logf("  %-12s %-7s %8s %8s %8s %8s %8s %7s %7s %7s  %s", "config", "rate", "req/s", "p50", "p99", "+p50", "+p99", "failed", "envoy", "router", "per engine")
			base := map[string][2]time.Duration{}
			p500 := map[string][2]time.Duration{}
			cpu500 := map[string]time.Duration{} // Envoy + router CPU per request
			for _, rate := range []int{100, 500, 0} {
				envoyTicks, routerTicks := make([]int64, len(targets)), make([]int64, len(targets))
				res := interleave(len(targets), phase, func(i int, d time.Duration) *loadResult {
					e0, r0 := ticksOf(targets[i].envoy), ticksOf(targets[i].router)
					r, _ := runRate(targets[i].url, gen, rate, d)
					envoyTicks[i] += ticksOf(targets[i].envoy) - e0
					routerTicks[i] += ticksOf(targets[i].router) - r0
					return r
				})
				for i, tg := range targets {
					r := res[i]
					_, label := runRate("", nil, rate, -1)
					p50, p99 := q(r.lat, 0.5), q(r.lat, 0.99)
					added := "       -        -"
					if i == 0 {
						base[label] = [2]time.Duration{p50, p99}
					} else {
						added = fmt.Sprintf("%8s %8s", ms(p50-base[label][0]), ms(p99-base[label][1]))
					}
					if rate == 500 {
						p500[tg.name] = [2]time.Duration{p50 - base[label][0], p99 - base[label][1]}
					}
					n := len(r.lat) + int(r.failed)
					if rate == 500 && n > 0 {
						cpu500[tg.name] = time.Duration((envoyTicks[i] + routerTicks[i]) * int64(time.Second/clockTick) / int64(n))
					}
					routerCPU := "-"
					if tg.router != 0 {
						routerCPU = perRequest(routerTicks[i], n)
					}
					t.Logf("  %-12s %-7s %8.0f %8s %8s %s %7d %7s %7s  %s", tg.name, label, r.rps(), ms(p50), ms(p99), added, r.failed,
						perRequest(envoyTicks[i], n), routerCPU, splitSummary(r.engines))
				}
			}
			fd, bf := p500["full duplex"], p500["buffered"]
			t.Logf("  full duplex vs buffered at 500 req/s: added p50 %s vs %s ms (%s), added p99 %s vs %s ms (%s), Envoy + router CPU per request %s vs %s ms (%s)",
				ms(fd[0]), ms(bf[0]), ratio(fd[0], bf[0]), ms(fd[1]), ms(bf[1]), ratio(fd[1], bf[1]),
				ms(cpu500["full duplex"]), ms(cpu500["buffered"]), ratio(cpu500["full duplex"], cpu500["buffered"]))
		}
	}
}

// interleave runs n configurations for d each, in slices of a second taken
// in turn (the order rotating from slice to slice), so that a machine whose
// load changes over the run weighs on all of them alike; it returns each
// configuration's merged result.
func interleave(n int, d time.Duration, run func(i int, d time.Duration) *loadResult) []*loadResult {
	parts := max(1, int(d/time.Second))
	out := make([]*loadResult, n)
	for k := 0; k < parts; k++ {
		for j := 0; j < n; j++ {
			i := (j + k) % n
			r := run(i, d/time.Duration(parts))
			if out[i] == nil {
				out[i] = r
				continue
			}
			out[i].lat = append(out[i].lat, r.lat...)
			out[i].failed += r.failed
			out[i].elapsed += r.elapsed
			for e, c := range r.engines {
				out[i].engines[e] += c
			}
		}
	}
	return out
}

// ticksOf is cpuTicks, 0 for pid 0 or a process gone.
func ticksOf(pid int) int64 {
	if pid == 0 {
		return 0
	}
	n, _ := cpuTicks(pid)
	return n
}

// perRequest is CPU ticks over n requests, in milliseconds.
func perRequest(ticks int64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(ticks)*1000/clockTick/float64(n))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

// ratio is a/b as a percentage over or under b ("n/a" when b is not
// positive: Envoy alone was as slow as the router, within noise).
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f%%", (float64(a)/float64(b)-1)*100)
}

// startFrontProxy runs another Envoy from envoy/front-proxy.yaml, changed
// by rewrite, in front of the stack's routers and engines.
func startFrontProxy(t *testing.T, s *stack, name string, rewrite func(string) string) (string, *proc) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "front-proxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var routers, engines []int
	for _, r := range s.routers {
		_, p := splitAddr(r.grpc)
		n, _ := strconv.Atoi(p)
		routers = append(routers, n)
	}
	for _, e := range s.engines {
		_, p := splitAddr(e.addr)
		n, _ := strconv.Atoi(p)
		engines = append(engines, n)
	}
	listen, admin := freePort(t), freePort(t)
	cfg := rewrite(renderFrontProxy(string(src), listen, admin, routers, engines))
	path := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, s.dir, name, envoyBin, "-c", path, "--log-level", "warn", "--base-id", fmt.Sprint(listen), "--disable-hot-restart")
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/ready", admin), 30*time.Second)
	return fmt.Sprintf("http://127.0.0.1:%d", listen), p
}

func q(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[int(p*float64(len(lat)-1))]
}

// startPlainEnvoy runs a second Envoy that round-robins over the stack's
// engines without ext_proc.
func startPlainEnvoy(t testing.TB, s *stack) (string, *proc) {
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
	p := startProc(t, s.dir, "plain-envoy", envoyBin, "-c", path, "--log-level", "warn", "--base-id", fmt.Sprint(listen), "--disable-hot-restart")
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/ready", admin), 30*time.Second)
	return fmt.Sprintf("http://127.0.0.1:%d", listen), p
}

func splitAddr(a string) (string, string) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:]
		}
	}
	return a, ""
}
