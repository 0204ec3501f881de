//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// A picker is an endpoint picker (EPP) the peer report runs behind the
// gateway-style Envoy: start launches it for the stack's engines with
// ext_proc (TLS) on grpcPort and gRPC health (plaintext) on healthPort.
type picker struct {
	name  string
	start func(t testing.TB, s *stack, grpcPort, healthPort int) *proc
}

// withPeerKnobs adds to a dualmap config made from examples/gateway-epp.yaml
// the diagnosis knobs of the peer runs: DUALMAP_PEER_DUALMAP_POOL, one more
// line of pool keys (e.g. "metrics: {enabled: false}" or "policy: {name:
// dualmap, params: {rebalance: false}}"), and DUALMAP_PEER_DUALMAP_LIMITS,
// one more line of limits keys (e.g. "queue_budget_tokens: -1").
func withPeerKnobs(t testing.TB, cfg string) string {
	t.Helper()
	if extra := os.Getenv("DUALMAP_PEER_DUALMAP_POOL"); extra != "" {
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, "    block_size: 16\n", "    block_size: 16\n    "+extra+"\n")
	}
	if extra := os.Getenv("DUALMAP_PEER_DUALMAP_LIMITS"); extra != "" {
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, "limits:\n", "limits:\n  "+extra+"\n")
	}
	return cfg
}

// dualmapPicker is dualmap with examples/gateway-epp.yaml as is (its
// defaults), only the engines' addresses and the ports changed.
func dualmapPicker() picker {
	return picker{name: "dualmap", start: func(t testing.TB, s *stack, gp, hp int) *proc {
		example, err := os.ReadFile(filepath.Join(repoRoot, "examples", "gateway-epp.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(example)
		for i, e := range s.engines {
			cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, fmt.Sprintf("address: 127.0.0.1:%d", 8001+i), "address: "+e.addr)
		}
		cfg = withPeerKnobs(t, cfg)
		ap := freePort(t)
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `grpc: ":9002"`, fmt.Sprintf(`grpc: "127.0.0.1:%d"`, gp))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `admin: "127.0.0.1:9090"`, fmt.Sprintf(`admin: "127.0.0.1:%d"`, ap))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `listen: ":9003"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, hp))
		path := filepath.Join(s.dir, "dualmap.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, s.dir, "dualmap", dualmapBin, "serve", "--config", path, "--shutdown-grace", "2s")
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", gp), admin: fmt.Sprintf("127.0.0.1:%d", ap)})
		return p
	}}
}

// llmdConfig is llm-d's default scheduling profile, "optimized-baseline"
// (test/perf/config/router-configs/optimized-baseline.yaml in
// llm-d-router), with the file-discovery plugin added so that it runs
// without Kubernetes.
const llmdConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- name: file-disc
  type: file-discovery
  parameters: {path: %q}
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: approx-prefix-cache-producer
  parameters:
    maxPrefixTokensToMatch: 100000
- type: prefix-cache-scorer
- type: no-hit-lru-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: no-hit-lru-scorer
    weight: 2
dataLayer:
  discovery:
    pluginRef: file-disc
`

// llmdPicker is llm-d's EPP (the binary at bin, scripts/llmd-epp.sh) with
// file discovery of the stack's engines, TLS (its default, self-signed)
// and one log line per request at most (--v 1).
func llmdPicker(bin string) picker {
	return picker{name: "llm-d", start: func(t testing.TB, s *stack, gp, hp int) *proc {
		var eps strings.Builder
		eps.WriteString("endpoints:\n")
		for i, e := range s.engines {
			host, port := splitAddr(e.addr)
			fmt.Fprintf(&eps, "- name: engine-%d\n  address: %q\n  port: %q\n", i, host, port)
		}
		epPath := filepath.Join(s.dir, "llmd-endpoints.yaml")
		cfgPath := filepath.Join(s.dir, "llmd-config.yaml")
		if err := os.WriteFile(epPath, []byte(eps.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(llmdConfig, epPath)), 0o644); err != nil {
			t.Fatal(err)
		}
		mp := freePort(t)
		p := startProc(t, s.dir, "llmd-epp", bin, "--pool-name", "bench", "--pool-namespace", "bench",
			"--config-file", cfgPath, "--grpc-port", fmt.Sprint(gp), "--grpc-health-port", fmt.Sprint(hp),
			"--metrics-port", fmt.Sprint(mp), "--metrics-endpoint-auth=false", "--tracing=false", "--v", "1")
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", gp), admin: fmt.Sprintf("127.0.0.1:%d", mp)})
		return p
	}}
}

// startPeerStack runs four engines at timeScale, the picker, and Envoy
// from envoy/gateway-epp.yaml (full duplex both ways, trailers SEND, TLS
// to the EPP, ORIGINAL_DST) without mutation_rules.disallow_is_error, which
// llm-d's EPP cannot pass (it echoes pseudo-headers back); both pickers get
// the same bootstrap. It returns once a request has been served.
func startPeerStack(t testing.TB, pk picker, timeScale float64) (*gatewayStack, *proc) {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir()}
	g := &gatewayStack{stack: s}
	for i := 0; i < 4; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		p := startProc(t, s.dir, fmt.Sprintf("engine-%d", i), dualmapBin, "engine", "--listen", addr,
			"--time-scale", fmt.Sprint(timeScale), "--name", addr, "--block-size", "16")
		s.engines = append(s.engines, &engineProc{proc: p, addr: addr})
	}
	for _, e := range s.engines {
		waitHTTP(t, "http://"+e.addr+"/health", 20*time.Second)
	}
	gp, hp := freePort(t), freePort(t)
	p := pk.start(t, s, gp, hp)
	g.health = []string{fmt.Sprintf("127.0.0.1:%d", hp)}
	waitGRPCServing(t, g.health[0], pk.name, p)

	src, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "gateway-epp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot := string(src)
	m := eppEndpointRe.FindStringSubmatch(boot)
	if m == nil {
		t.Fatal("envoy/gateway-epp.yaml: the EPP endpoint (9002, health 9003) not found")
	}
	boot = eppEndpointRe.ReplaceAllLiteralString(boot, fmt.Sprintf(
		"%[1]s- endpoint:\n%[1]s    address: {socket_address: {address: 127.0.0.1, port_value: %[2]d}}\n%[1]s    health_check_config: {port_value: %[3]d}\n", m[1], gp, hp))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "              mutation_rules:\n                disallow_is_error: true\n", "")
	listen, admin := freePort(t), freePort(t)
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 8080", fmt.Sprintf("port_value: %d", listen))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 9901", fmt.Sprintf("port_value: %d", admin))
	s.startEnvoy(t, boot, listen, admin)
	g.waitEPPHealth(t, 0, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _ := benchPost(s.url, chatBody("warm up "+pk.name, "hi", false, 1))
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no request served through Envoy in 30s\n%s", pk.name, tail(p.log, 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return g, p
}

// waitGRPCServing waits until the picker's health port says SERVING for
// envoy.service.ext_proc.v3.ExternalProcessor.
func waitGRPCServing(t testing.TB, addr, name string, p *proc) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ext_proc.v3.ExternalProcessor"})
		cancel()
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: health on %s not SERVING after 60s (%v, %v)\n%s", name, addr, r, err, tail(p.log, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// envInt reads a positive integer knob.
func envInt(t testing.TB, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

// TestPeerReport runs dualmap and llm-d's endpoint picker in turn behind
// the same gateway-style Envoy (envoy/gateway-epp.yaml: full duplex both
// ways, trailers SEND, TLS to the EPP, ORIGINAL_DST), with the same four
// `dualmap engine`s, and reports:
//   - through engines that answer at once (time scale 1e6) and 2 KB
//     prompts that all differ, both pickers and Envoy alone (round robin,
//     no ext_proc) running side by side and measured a second at a time in
//     turn: p50/p99 at 100 and 500 requests/s, what that adds over Envoy
//     alone, the most requests/s 64 closed-loop clients get through, and
//     the picker's CPU per request in each phase (utime+stime from
//     /proc/<pid>/stat);
//   - the conversation trace replayed as TestTraceReplayMatchesSimulator
//     does (prompts at a quarter size, at most 32 output tokens, engines 20
//     times faster than the profile) at each rate of DUALMAP_PEER_QPS (default "20,200": below
//     and past saturation of the four engines), fresh engines for each:
//     TTFT p50/p90/p99, the hit rate the engines report (cached tokens)
//     and requests per instance.
//
// A report, not a pass/fail test: it runs with DUALMAP_BENCH_PEER=1 and
// DUALMAP_LLMD_EPP=<llm-d EPP binary> (make bench-peer LLMD_SRC=...).
// DUALMAP_PEER_TRACE (default ../shared/traces/conversation_trace.jsonl)
// and DUALMAP_PEER_REQUESTS (default 800) choose the replay;
// DUALMAP_PEER_PHASES (default "throughput,replay") the parts that run;
// DUALMAP_PEER_METRICS=1 samples where requests wait during each replay;
// DUALMAP_PEER_CONCURRENCY (default 2048) caps the replay's requests in
// flight; DUALMAP_PEER_DUALMAP_LIMITS adds a line under dualmap's limits
// (e.g. "queue_budget_tokens: -1") for diagnosis.
func TestPeerReport(t *testing.T) {
	if os.Getenv("DUALMAP_BENCH_PEER") == "" {
		t.Skip("set DUALMAP_BENCH_PEER=1 and DUALMAP_LLMD_EPP (make bench-peer LLMD_SRC=...) to measure")
	}
	llmdBin := os.Getenv("DUALMAP_LLMD_EPP")
	if llmdBin == "" {
		t.Fatal("DUALMAP_LLMD_EPP is not set: the llm-d EPP binary (bash scripts/llmd-epp.sh <llm-d-router checkout>)")
	}
	tracePath := os.Getenv("DUALMAP_PEER_TRACE")
	if tracePath == "" {
		tracePath = filepath.Join(repoRoot, "..", "shared", "traces", "conversation_trace.jsonl")
	}
	requests := envInt(t, "DUALMAP_PEER_REQUESTS", 800)
	var rates []float64
	for _, f := range strings.Split(cmpOr(os.Getenv("DUALMAP_PEER_QPS"), "20,200"), ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			t.Fatalf("DUALMAP_PEER_QPS=%q: want comma-separated positive rates", os.Getenv("DUALMAP_PEER_QPS"))
		}
		rates = append(rates, v)
	}
	tr, err := trace.ReadFile(tracePath, trace.Options{Limit: requests})
	if err != nil {
		t.Fatalf("DUALMAP_PEER_TRACE: %v", err)
	}
	pickers := []picker{dualmapPicker(), llmdPicker(llmdBin)}
	phase := 3 * time.Second

	phases := cmpOr(os.Getenv("DUALMAP_PEER_PHASES"), "throughput,replay")
	if strings.Contains(phases, "throughput") {
		peerThroughput(t, pickers, phase)
	}
	if !strings.Contains(phases, "replay") {
		return
	}
	peerReplay(t, pickers, tr, tracePath, rates)
}

// peerThroughput is the report's first part: added latency, maximum
// requests/s and CPU per request.
func peerThroughput(t *testing.T, pickers []picker, phase time.Duration) {
	t.Logf("== added latency and throughput: 2 KB prompts, all different; engines answer at once; load average %s ==", loadAvg())
	t.Logf("  %-12s %-5s %8s %8s %8s %8s %8s %7s %10s  %s", "picker", "rate", "req/s", "p50", "p99", "+p50", "+p99", "failed", "cpu ms/req", "per engine")
	// All three at once, measured in turn a second at a time (interleave):
	// Envoy alone over the dualmap stack's engines is the baseline of the
	// "+" columns.
	type target struct {
		name string
		url  string
		pid  int // the picker's, 0 for none
	}
	var targets []target
	var stacks []*gatewayStack
	for _, pk := range pickers {
		g, p := startPeerStack(t, pk, 1e6)
		stacks = append(stacks, g)
		targets = append(targets, target{pk.name, g.url, p.cmd.Process.Pid})
	}
	plainURL, _ := startPlainEnvoy(t, stacks[0].stack)
	targets = append([]target{{"envoy alone", plainURL, 0}}, targets...)
	gen := newBodyGen(t, 2<<10, 1)
	for _, tg := range targets {
		closedLoopGen(tg.url, gen, 8, 500*time.Millisecond)
	}
	base := map[string][2]time.Duration{}
	for _, rate := range []int{100, 500, 0} {
		ticks := make([]int64, len(targets))
		res := interleave(len(targets), phase, func(i int, d time.Duration) *loadResult {
			var c0 int64
			if targets[i].pid != 0 {
				c0, _ = cpuTicks(targets[i].pid)
			}
			r, _ := runRate(targets[i].url, gen, rate, d)
			if targets[i].pid != 0 {
				c1, _ := cpuTicks(targets[i].pid)
				ticks[i] += c1 - c0
			}
			return r
		})
		_, label := runRate("", nil, rate, -1)
		for i, tg := range targets {
			r := res[i]
			p50, p99 := q(r.lat, 0.5), q(r.lat, 0.99)
			added, cpu := [2]string{"-", "-"}, "-"
			if i == 0 {
				base[label] = [2]time.Duration{p50, p99}
			} else {
				added = [2]string{ms(p50 - base[label][0]), ms(p99 - base[label][1])}
				cpu = perRequest(ticks[i], len(r.lat)+int(r.failed))
			}
			t.Logf("  %-12s %-5s %8.0f %8s %8s %8s %8s %7d %10s  %s", tg.name, label, r.rps(), ms(p50), ms(p99), added[0], added[1], r.failed, cpu, splitSummary(r.engines))
		}
	}
	for _, g := range stacks {
		g.stop()
	}

}

// peerReplay is the report's second part: the conversation trace at each
// rate, each picker with fresh engines.
func peerReplay(t *testing.T, pickers []picker, tr *trace.Trace, tracePath string, rates []float64) {
	metrics := os.Getenv("DUALMAP_PEER_METRICS") != ""
	concurrency := envInt(t, "DUALMAP_PEER_CONCURRENCY", 2048)
	t.Logf("== conversation trace: first %d requests of %s, prompts x%.2f, <= %d output tokens, engines x%d ==",
		len(tr.Requests), filepath.Base(tracePath), replayScale, replayMaxOutput, replaySpeed)
	t.Logf("  %-8s %5s %8s %6s %7s %7s %8s %8s %8s %8s %7s  %s", "picker", "qps", "sent/s", "ok", "failed", "delayed", "ttft p50", "p90", "p99", "e2e p50", "hit", "per instance: requests (hit %, ttft p50 ms)")
	for _, rate := range rates {
		for _, pk := range pickers {
			g, _ := startPeerStack(t, pk, replaySpeed)
			var smp *loadSampler
			if metrics {
				admin := ""
				if pk.name == "dualmap" {
					admin = g.routers[0].admin
				}
				smp = sampleLoad(g.engines, admin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			la := loadAvg()
			// Arrivals stay open loop past saturation: the client's
			// concurrency cap (DUALMAP_PEER_CONCURRENCY, default 2048) is far
			// above what the pool serves at once. replay's own default, 256,
			// makes later arrivals wait in the client, uncounted in TTFT.
			_, sum, err := replay.Run(ctx, tr, replay.Options{URL: g.url, QPS: rate, Stream: true, Concurrency: concurrency,
				MaxOutput: replayMaxOutput, ScaleTokens: replayScale, Seed: replaySeed, Model: "dualmap-sim"})
			cancel()
			if err != nil {
				t.Fatalf("%s at %v QPS: %v", pk.name, rate, err)
			}
			var inst []string
			for name, is := range sum.PerInstance {
				inst = append(inst, fmt.Sprintf("%s: %d (%.1f%%, %d)", name[strings.LastIndexByte(name, ':')+1:], is.Requests, 100*is.HitRate, is.TTFTP50.Milliseconds()))
			}
			slices.Sort(inst)
			t.Logf("  %-8s %5.0f %8.1f %6d %7d %7d %8d %8d %8d %8d %6.1f%%  %s   [load %s]", pk.name, rate, sum.AchievedQPS, sum.OK, sum.Failed, sum.Delayed,
				sum.TTFT.P50.Milliseconds(), sum.TTFT.P90.Milliseconds(), sum.TTFT.P99.Milliseconds(), sum.E2E.P50.Milliseconds(), 100*sum.HitRate, strings.Join(inst, "  "), la)
			if metrics {
				t.Logf("    %s", smp.finish(g.engines))
				if pk.name == "dualmap" {
					t.Logf("%s", pickerMetrics(g.routers[0].admin))
				}
			}
			g.stop()
		}
	}
}

// runRate is one load phase: rate requests/s open loop, or (rate 0) 64
// closed-loop clients.
// A negative d only names the phase.
func runRate(url string, gen *bodyGen, rate int, d time.Duration) (*loadResult, string) {
	if d < 0 {
		if rate == 0 {
			return nil, "max"
		}
		return nil, fmt.Sprint(rate)
	}
	if rate == 0 {
		return closedLoopGen(url, gen, 64, d), "max"
	}
	return openLoopGen(url, gen, rate, d), fmt.Sprint(rate)
}

// pickerMetrics is dualmap's queue and shedding lines from /metrics.
func pickerMetrics(admin string) string {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "dualmap_queue_wait_seconds_sum") || strings.HasPrefix(l, "dualmap_queue_wait_seconds_count") ||
			strings.HasPrefix(l, "dualmap_decisions_total") || strings.Contains(l, "shed") {
			out = append(out, "    "+l)
		}
	}
	return strings.Join(out, "\n")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loadSampler polls, every 50 ms during a replay, each engine's vLLM
// gauges (requests running and waiting in the engine) and, for dualmap,
// the router's queue depth: where requests wait, and whether engines had
// nothing waiting while the router held requests back.
type loadSampler struct {
	stop, done chan struct{}
	samples    int
	running    float64 // summed over engines and samples
	waiting    float64
	queued     float64 // router queue depth, summed over samples
	queuedN    int     // samples with requests in the router queue
	starved    int     // of those, samples where some engine had nothing waiting
	allIdle    int     // of those, samples where no engine had anything waiting
	busy       int     // samples with requests anywhere (router or engines)
}

func sampleLoad(engines []*engineProc, admin string) *loadSampler {
	s := &loadSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			var run, wait float64
			idle, all := false, true
			for _, e := range engines {
				m := scrapeFirst("http://" + e.addr + "/metrics")
				r, w := m["vllm:num_requests_running"], m["vllm:num_requests_waiting"]
				run += r
				wait += w
				if w == 0 {
					idle = true
				} else {
					all = false
				}
			}
			q := 0.0
			if admin != "" {
				q = scrapeFirst("http://" + admin + "/metrics")["dualmap_queue_depth"]
			}
			s.samples++
			s.running += run
			s.waiting += wait
			s.queued += q
			if q > 0 {
				s.queuedN++
				if idle {
					s.starved++
				}
				if all {
					s.allIdle++
				}
			}
			if q+run+wait > 0 {
				s.busy++
			}
		}
	}()
	return s
}

// finish stops the sampler and describes what it saw, with the engines'
// own mean TTFT (simulated seconds, from their histogram).
func (s *loadSampler) finish(engines []*engineProc) string {
	close(s.stop)
	<-s.done
	n := float64(max(1, s.samples))
	var ttftSum, ttftN float64
	for _, e := range engines {
		m := scrapeFirst("http://" + e.addr + "/metrics")
		ttftSum += m["vllm:time_to_first_token_seconds_sum"]
		ttftN += m["vllm:time_to_first_token_seconds_count"]
	}
	return fmt.Sprintf("load (%d samples, %d busy): mean running in engines %.1f, waiting in engines %.1f, waiting in the router %.1f; router queue non-empty in %d samples, in %d of them some engine and in %d every engine had nothing waiting; engine-side mean TTFT %.0f ms wall",
		s.samples, s.busy, s.running/n, s.waiting/n, s.queued/n, s.queuedN, s.starved, s.allIdle, 1000*ttftSum/max(1, ttftN)/replaySpeed)
}

// scrapeFirst reads a Prometheus text page into name -> value, the first
// sample of each name whatever its labels (one pool, one model here).
func scrapeFirst(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		name := l[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		if _, seen := out[name]; !seen {
			out[name] = v
		}
	}
	return out
}
