//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/peerbench"
	"github.com/dualmap/dualmap/internal/replay"
)

// The peer benchmark (TestPeerBench, make bench-peer) and its smaller
// check (TestPeerHarness): one or more replicas of a picker behind the
// gateway-style Envoy of envoy/gateway-epp.yaml (its EPP cluster with one
// endpoint per replica), in front of engines of one kind.

// A peerEngines is the kind and number of engines of a run.
type peerEngines struct {
	kind      string // "llmd-sim" (llm-d's vLLM simulator) or "dualmap" (dualmap engine)
	n         int
	bin       string  // llm-d-inference-sim, for llmd-sim
	profile   string  // its config file, for llmd-sim
	timeScale float64 // dualmap engine's --time-scale
	// args, when set, is engine i's command line on port (dualmap
	// engines with flags of their own, e.g. TestKVEventsReport's).
	args func(i, port int) []string
}

// peerEnginesFromEnv reads DUALMAP_PEER_ENGINE (llmd-sim when
// DUALMAP_LLMD_SIM names its binary, else dualmap), DUALMAP_PEER_INSTANCES
// (8 llm-d simulators, or 4 dualmap engines at time scale 20 as
// TestPeerReport runs them) and DUALMAP_LLMD_SIM_PROFILE (default
// e2e/testdata/llmd-sim-profile.yaml).
func peerEnginesFromEnv(t testing.TB) peerEngines {
	sim := os.Getenv("DUALMAP_LLMD_SIM")
	kind := os.Getenv("DUALMAP_PEER_ENGINE")
	if kind == "" {
		kind = "dualmap"
		if sim != "" {
			kind = "llmd-sim"
		}
	}
	switch kind {
	case "llmd-sim":
		if sim == "" {
			t.Fatal("DUALMAP_PEER_ENGINE=llmd-sim needs DUALMAP_LLMD_SIM (bash scripts/llmd-sim.sh <llm-d-inference-sim checkout> <llm-d-router checkout>)")
		}
		return peerEngines{kind: kind, n: envInt(t, "DUALMAP_PEER_INSTANCES", 8), bin: sim,
			profile: cmpOr(os.Getenv("DUALMAP_LLMD_SIM_PROFILE"), filepath.Join(repoRoot, "e2e", "testdata", "llmd-sim-profile.yaml"))}
	case "dualmap":
		return peerEngines{kind: kind, n: envInt(t, "DUALMAP_PEER_INSTANCES", 4), timeScale: replaySpeed}
	}
	t.Fatalf("DUALMAP_PEER_ENGINE=%q: want llmd-sim or dualmap", kind)
	return peerEngines{}
}

// start runs the engines into s and waits until they answer /health.
func (e peerEngines) start(t testing.TB, s *stack) {
	t.Helper()
	for i := 0; i < e.n; i++ {
		port := freePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var args []string
		if e.args != nil {
			args = e.args(i, port)
		} else if e.kind == "llmd-sim" {
			// POD_IP is required with the KV cache on (it names the ZMQ
			// topic); env(1) execs, so the pid stays the simulator's.
			args = []string{"env", "POD_IP=127.0.0.1", e.bin, "--config", e.profile, "--port", fmt.Sprint(port)}
		} else {
			args = []string{dualmapBin, "engine", "--listen", addr, "--time-scale", fmt.Sprint(e.timeScale), "--name", addr, "--block-size", "16"}
		}
		p := startProc(t, s.dir, fmt.Sprintf("engine-%d", i), args...)
		s.engines = append(s.engines, &engineProc{proc: p, addr: addr})
	}
	for _, en := range s.engines {
		waitHTTP(t, "http://"+en.addr+"/health", 60*time.Second)
	}
}

// A benchPicker starts replica i of a picker on the stack's engines:
// ext_proc (TLS) on grpcPort, gRPC health on healthPort; redis is the
// address the replicas share state through ("" for one replica or a
// picker that shares nothing).
type benchPicker struct {
	name    string
	shares  bool // replicas share state through Redis
	start   func(t testing.TB, s *stack, i, grpcPort, healthPort int, redis string) *proc
	limits  string
	llmdBin string
}

// benchDualmap is dualmap with examples/gateway-epp.yaml as is, only the
// addresses and ports changed (and, with replicas, the shared Redis the
// docs describe); limits, when not empty, is one more line under limits
// (the capacity ramp's "without the router queue").
func benchDualmap(name, limits string) benchPicker { return benchDualmapPolicy(name, "", limits) }

// benchDualmapPolicy is benchDualmap with the pool's policy set to policy
// (a scheduler policy name such as round-robin; "" keeps the example's,
// dualmap).
func benchDualmapPolicy(name, policy, limits string) benchPicker {
	return benchDualmapPool(name, policy, limits, "")
}

// benchDualmapPool is benchDualmapPolicy with pool, when not empty, added
// to the pool's keys (lines indented as the pool's, e.g. its kv_events).
func benchDualmapPool(name, policy, limits, pool string) benchPicker {
	return benchPicker{name: name, shares: true, limits: limits, start: func(t testing.TB, s *stack, i, gp, hp int, redis string) *proc {
		example, err := os.ReadFile(filepath.Join(repoRoot, "examples", "gateway-epp.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(example)
		inst := "    instances:\n      - address: 127.0.0.1:8001\n      - address: 127.0.0.1:8002\n      - address: 127.0.0.1:8003\n      - address: 127.0.0.1:8004\n"
		var b strings.Builder
		b.WriteString("    instances:\n")
		for _, e := range s.engines {
			fmt.Fprintf(&b, "      - address: %s\n", e.addr)
		}
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, inst, b.String())
		if limits != "" {
			cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, "limits:\n", "limits:\n  "+limits+"\n")
		}
		if policy != "" {
			cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, "    block_size: 16\n", "    block_size: 16\n    policy: {name: "+policy+"}\n")
		}
		if pool != "" {
			cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, "    block_size: 16\n", "    block_size: 16\n"+pool)
		}
		if policy == "" {
			// dualmap's own policy: the runs' knobs apply (they were read
			// only by TestPeer before, so make bench-peer ignored them).
			cfg = withPeerKnobs(t, cfg)
		}
		ap := freePort(t)
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `grpc: ":9002"`, fmt.Sprintf(`grpc: "127.0.0.1:%d"`, gp))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `admin: "127.0.0.1:9090"`, fmt.Sprintf(`admin: "127.0.0.1:%d"`, ap))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `listen: ":9003"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, hp))
		if redis != "" {
			cfg += fmt.Sprintf("\nstate:\n  backend: redis\n  redis: {addrs: [%q]}\n", redis)
		}
		path := filepath.Join(s.dir, fmt.Sprintf("dualmap-%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, s.dir, fmt.Sprintf("dualmap-%d", i), dualmapBin, "serve", "--config", path, "--shutdown-grace", "2s")
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", gp), admin: fmt.Sprintf("127.0.0.1:%d", ap)})
		return p
	}}
}

// benchLLMD is llm-d's EPP in its default profile (llmdConfig:
// optimized-baseline plus file discovery); its replicas are independent
// pickers, as its users run them.
func benchLLMD(bin string) benchPicker {
	return benchPicker{name: "llm-d", llmdBin: bin, start: func(t testing.TB, s *stack, i, gp, hp int, _ string) *proc {
		var eps strings.Builder
		eps.WriteString("endpoints:\n")
		for k, e := range s.engines {
			host, port := splitAddr(e.addr)
			fmt.Fprintf(&eps, "- name: engine-%d\n  address: %q\n  port: %q\n", k, host, port)
		}
		epPath := filepath.Join(s.dir, fmt.Sprintf("llmd-endpoints-%d.yaml", i))
		cfgPath := filepath.Join(s.dir, fmt.Sprintf("llmd-config-%d.yaml", i))
		if err := os.WriteFile(epPath, []byte(eps.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(llmdConfig, epPath)), 0o644); err != nil {
			t.Fatal(err)
		}
		mp := freePort(t)
		p := startProc(t, s.dir, fmt.Sprintf("llmd-epp-%d", i), bin, "--pool-name", "bench", "--pool-namespace", "bench",
			"--config-file", cfgPath, "--grpc-port", fmt.Sprint(gp), "--grpc-health-port", fmt.Sprint(hp),
			"--metrics-port", fmt.Sprint(mp), "--metrics-endpoint-auth=false", "--tracing=false", "--v", "1")
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", gp), admin: fmt.Sprintf("127.0.0.1:%d", mp)})
		return p
	}}
}

// benchStack is one run's stack: fresh engines, the picker's replicas (and
// their Redis), Envoy.
type benchStack struct {
	*gatewayStack
	pickers []*proc
}

// startBenchStack starts engines, replicas of pk (sharing a fresh Redis
// when pk shares state and replicas > 1) and Envoy from
// envoy/gateway-epp.yaml with one EPP endpoint per replica (less
// mutation_rules.disallow_is_error, which llm-d's EPP cannot pass; both
// pickers get the same bootstrap). It returns once a request has been
// served through every replica's health-checked endpoint.
func startBenchStack(t testing.TB, eng peerEngines, pk benchPicker, replicas int) *benchStack {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir()}
	g := &gatewayStack{stack: s}
	eng.start(t, s)
	redis := ""
	if pk.shares && replicas > 1 {
		redis = startRedis(t, s.dir).addr
	}
	b := &benchStack{gatewayStack: g}
	var eppEndpoints strings.Builder
	var grpcAddrs []string
	for i := 0; i < replicas; i++ {
		gp, hp := freePort(t), freePort(t)
		p := pk.start(t, s, i, gp, hp, redis)
		b.pickers = append(b.pickers, p)
		g.health = append(g.health, fmt.Sprintf("127.0.0.1:%d", hp))
		grpcAddrs = append(grpcAddrs, fmt.Sprintf("127.0.0.1:%d", gp))
		fmt.Fprintf(&eppEndpoints, "%%[1]s- endpoint:\n%%[1]s    address: {socket_address: {address: 127.0.0.1, port_value: %d}}\n%%[1]s    health_check_config: {port_value: %d}\n", gp, hp)
	}
	for i, h := range g.health {
		waitGRPCServing(t, h, pk.name, b.pickers[i])
		// llm-d's EPP reports SERVING on its health port before its
		// ext_proc port listens (it makes a self-signed certificate
		// first, seconds on a busy machine): Envoy would send a share of
		// the run to a replica that refuses the connection, and the run
		// would count those 500s against the picker.
		waitListening(t, grpcAddrs[i], pk.name, b.pickers[i], time.Minute)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "gateway-epp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot := string(src)
	m := eppEndpointRe.FindStringSubmatch(boot)
	if m == nil {
		t.Fatal("envoy/gateway-epp.yaml: the EPP endpoint (9002, health 9003) not found")
	}
	boot = eppEndpointRe.ReplaceAllLiteralString(boot, fmt.Sprintf(eppEndpoints.String(), m[1]))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "              mutation_rules:\n                disallow_is_error: true\n", "")
	listen, admin := freePort(t), freePort(t)
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 8080", fmt.Sprintf("port_value: %d", listen))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 9901", fmt.Sprintf("port_value: %d", admin))
	s.startEnvoy(t, boot, listen, admin)
	for i := range g.health {
		g.waitEPPHealth(t, i, true)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _ := benchPost(s.url, chatBody("warm up "+pk.name, "hi", false, 1))
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no request served through Envoy in 30s\n%s", pk.name, tail(b.pickers[0].log, 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return b
}

// enginePage is the engine at addr's /metrics page (at most 8 MiB).
func enginePage(t testing.TB, addr string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("engine %s /metrics: %v", addr, err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatalf("engine %s /metrics: %v", addr, err)
	}
	return page
}

// cacheCounters sums the engines' prefix-cache counters; an engine that
// has not published them yet counts zero, and the count of engines that
// did is returned too, with each engine's prefill tokens
// (vllm:prompt_tokens_total, 0 where not published).
func (b *benchStack) cacheCounters(t testing.TB) (peerbench.CacheCounters, int, []float64) {
	t.Helper()
	var sum peerbench.CacheCounters
	reported := 0
	prefill := make([]float64, len(b.engines))
	for i, e := range b.engines {
		page := enginePage(t, e.addr)
		if v, ok, err := peerbench.ParseCounter(bytes.NewReader(page), peerbench.MetricPromptTokens); err == nil && ok {
			prefill[i] = v
		}
		c, err := peerbench.ParseCacheCounters(bytes.NewReader(page))
		switch {
		case errors.Is(err, peerbench.ErrNoCacheCounters):
			continue
		case err != nil:
			t.Fatalf("engine %s: %v", e.addr, err)
		}
		reported++
		sum = sum.Add(c)
	}
	return sum, reported, prefill
}

// engineTimes sums the engines' queue and prefill histograms
// (peerbench.EngineTimes); timed is how many engines serve them.
func (b *benchStack) engineTimes(t testing.TB) (sum peerbench.EngineTimes, timed int) {
	t.Helper()
	for _, e := range b.engines {
		page := enginePage(t, e.addr)
		et, ok, err := peerbench.ParseEngineTimes(page)
		if err != nil {
			t.Fatalf("engine %s: %v", e.addr, err)
		}
		if ok {
			sum, timed = sum.Add(et), timed+1
		}
	}
	return sum, timed
}

// ticks sums utime+stime of the processes.
func ticks(ps []*proc) int64 {
	var n int64
	for _, p := range ps {
		if c, err := cpuTicks(p.cmd.Process.Pid); err == nil {
			n += c
		}
	}
	return n
}

func (b *benchStack) engineProcs() []*proc {
	var ps []*proc
	for _, e := range b.engines {
		ps = append(ps, e.proc)
	}
	return ps
}

// peerClient is how a run sends its requests: "replay" (dualmap replay,
// in process) or "aiperf" (scripts/aiperf-run.sh).
type peerClient struct {
	name        string
	concurrency int
	outDir      string
}

// run sends the workload at qps to url, fills the client's figures of row
// and, for replay, returns the step a capacity ramp needs.
func (c peerClient) run(t testing.TB, w peerbench.Workload, url string, qps float64, row *peerbench.Row, tag string) peerbench.RampStep {
	t.Helper()
	switch c.name {
	case "replay":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		res, sum, err := replay.Run(ctx, w.Trace, replay.Options{URL: url, QPS: qps, Stream: true, Concurrency: c.concurrency,
			MaxOutput: w.MaxOutput, ScaleTokens: w.Scale, Seed: replaySeed, Model: "dualmap-sim", IgnoreEOS: true})
		if err != nil {
			t.Fatalf("%s at %v QPS: %v", tag, qps, err)
		}
		row.FromReplay(res, sum)
		if c.outDir != "" { // the benchmark's runs: every request's figures, for tails
			c.saveResults(t, tag, res)
		}
		st := peerbench.RampStep{Offered: qps, Sent: sum.AchievedQPS, OK: sum.OK, Failed: sum.Failed}
		ok := slices.DeleteFunc(slices.Clone(res), func(r replay.Result) bool { return !r.OK() })
		slices.SortStableFunc(ok, func(a, b replay.Result) int { return cmp.Compare(a.Sent, b.Sent) })
		for _, r := range ok {
			st.E2E = append(st.E2E, r.E2E)
		}
		return st
	case "aiperf":
		script := filepath.Join(repoRoot, "scripts", "aiperf-run.sh")
		if _, err := os.Stat(script); err != nil {
			t.Fatalf("DUALMAP_PEER_CLIENT=aiperf: %v (the runner: bash scripts/aiperf-run.sh <base-url> <workload file> <rate> <outdir>)", err)
		}
		dir := filepath.Join(c.outDir, "client", strings.ReplaceAll(tag, " ", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mooncake := filepath.Join(dir, "workload.mooncake.jsonl")
		prompts := filepath.Join(dir, "workload.prompts.jsonl")
		var mb, pb bytes.Buffer
		bs, err := w.WriteMooncake(&mb, qps)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePrompts(&pb, qps, replaySeed); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mooncake, mb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prompts, pb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", script, url, mooncake, fmt.Sprint(qps), dir)
		cmd.Env = append(os.Environ(), fmt.Sprintf("DUALMAP_PEER_BLOCK_SIZE=%d", bs), "DUALMAP_PEER_PROMPTS="+prompts)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: scripts/aiperf-run.sh: %v\n%s", tag, err, tail2(errb.String(), 20))
		}
		if err := row.FromClientJSON(out.String()); err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		return peerbench.RampStep{}
	}
	t.Fatalf("DUALMAP_PEER_CLIENT=%q: want replay or aiperf", c.name)
	return peerbench.RampStep{}
}

func tail2(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// saveResults writes each request's replay.Result (durations in
// nanoseconds) as a JSON line to client/<tag>/requests.jsonl: where a
// percentile came from (which instance, how much of the prompt was cached,
// how late it was sent).
func (c peerClient) saveResults(t testing.TB, tag string, res []replay.Result) {
	t.Helper()
	dir := filepath.Join(c.outDir, "client", strings.ReplaceAll(tag, " ", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range res {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "requests.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// benchRun is one run: a fresh stack, the workload at qps, the row.
func benchRun(t testing.TB, eng peerEngines, pk benchPicker, replicas int, w peerbench.Workload, qps float64, c peerClient, row peerbench.Row) (peerbench.Row, peerbench.RampStep) {
	t.Helper()
	b := startBenchStack(t, eng, pk, replicas)
	defer b.stop()
	row.Engine, row.Workload, row.Picker, row.Replicas, row.QPS, row.Client = eng.kind, w.Name, pk.name, replicas, qps, c.name
	row.LoadAvg = loadAvg()
	c0, _, f0 := b.cacheCounters(t)
	t0, _ := b.engineTimes(t)
	p0, e0 := ticks(b.pickers), ticks(b.engineProcs())
	start := time.Now()
	st := c.run(t, w, b.url, qps, &row, fmt.Sprintf("%s %s x%d %s %.1fqps run%d", eng.kind, pk.name, replicas, w.Name, qps, row.Run))
	wall := time.Since(start).Seconds()
	p1, e1 := ticks(b.pickers), ticks(b.engineProcs())
	c1, reported, f1 := b.cacheCounters(t)
	if t1, timed := b.engineTimes(t); timed == len(b.engines) {
		row.EngineTimes = t1.Sub(t0).PerRequest()
	}
	if reported == 0 {
		t.Fatalf("%s: no engine published %s after the run: the engines do not report their prefix cache", eng.kind, peerbench.MetricPrefixQueries)
	}
	row.EngineHitRate = c1.Sub(c0).HitRate()
	for i := range f1 {
		row.EnginePrefill = append(row.EnginePrefill, f1[i]-f0[i])
	}
	if row.Requests > 0 {
		row.PickerCPUMSPerRequest = float64(p1-p0) * 1000 / clockTick / float64(row.Requests)
	}
	row.EngineCPU = float64(e1-e0) / clockTick / wall
	row.Queue = b.queueStats(t)
	if c.outDir != "" { // the benchmark's runs, not TestPeerHarness's
		b.saveRouterState(t, filepath.Join(c.outDir, "routers", strings.ReplaceAll(fmt.Sprintf("%s %s x%d %s %.1fqps %d%% run%d", eng.kind, pk.name, replicas, w.Name, qps, int(row.Percent), row.Run), " ", "_")))
	}
	return row, st
}

// saveRouterState writes, after a run, each picker replica's /metrics and
// /debug/instances (router-<i>.metrics, router-<i>.instances.json) and
// each engine's /metrics (engine-<i>.metrics) and dualmap's configs
// (dualmap-<i>.yaml) into dir, for reading where
// the requests went: dualmap_decisions_total by reason, migrations, the
// engines' own prefix-cache counters per instance. A page that does not
// answer (llm-d's picker has no /debug/instances) is skipped.
func (b *benchStack) saveRouterState(t testing.TB, dir string) {
	t.Helper()
	type page struct{ url, file string }
	var pages []page
	for i, r := range b.routers {
		pages = append(pages, page{"http://" + r.admin + "/metrics", fmt.Sprintf("router-%d.metrics", i)},
			page{"http://" + r.admin + "/debug/instances", fmt.Sprintf("router-%d.instances.json", i)})
	}
	for i, e := range b.engines {
		pages = append(pages, page{"http://" + e.addr + "/metrics", fmt.Sprintf("engine-%d.metrics", i)})
	}
	for _, f := range pages {
		resp, err := http.Get(f.url)
		if err != nil {
			t.Logf("%s: %v", f.url, err)
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			continue // llm-d's picker has no /debug/instances
		case err != nil || resp.StatusCode != http.StatusOK:
			t.Logf("%s: status %d, %v", f.url, resp.StatusCode, err)
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// dualmap's config as each replica read it (the knobs included).
	cfgs, _ := filepath.Glob(filepath.Join(b.dir, "dualmap-*.yaml"))
	for _, c := range cfgs {
		if body, err := os.ReadFile(c); err == nil {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(c)), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each replica's log, its last 2,000 lines: what a picker said about
	// the requests it failed.
	for i, p := range b.pickers {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("router-%d.log", i)), []byte(tail(p.log, 2000)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// queueStats sums what the replicas' router queues held (dualmap's
// dualmap_queue_wait_seconds on their admin port); nil when no replica
// reports it (llm-d's picker).
func (b *benchStack) queueStats(t testing.TB) *peerbench.QueueStats {
	t.Helper()
	var sum *peerbench.QueueStats
	for _, r := range b.routers {
		resp, err := http.Get("http://" + r.admin + "/metrics")
		if err != nil {
			t.Logf("picker %s /metrics: %v", r.admin, err)
			continue
		}
		q, err := peerbench.ParseQueueStats(resp.Body)
		resp.Body.Close()
		switch {
		case errors.Is(err, peerbench.ErrNoQueueMetrics):
			continue
		case err != nil:
			t.Fatalf("picker %s: %v", r.admin, err)
		}
		if sum == nil {
			sum = &peerbench.QueueStats{}
		}
		*sum = sum.Add(q)
	}
	return sum
}

// floats reads a comma-separated list of positive numbers.
func floats(t testing.TB, key, def string) []float64 {
	var out []float64
	for _, f := range strings.Split(cmpOr(os.Getenv(key), def), ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			t.Fatalf("%s=%q: want comma-separated positive numbers", key, os.Getenv(key))
		}
		out = append(out, v)
	}
	return out
}

// TestPeerBench is the peer benchmark (a report, not a pass/fail test;
// make bench-peer): for each workload, the capacity of the setup measured
// by a rate ramp, then each picker in turn (interleaved) at each share of
// that capacity, with one and three replicas, fresh engines per run, each
// run repeated; a Markdown table in the log and raw rows as JSON in the
// output directory. Knobs (scripts/bench-peer.sh lists them with their
// defaults): DUALMAP_PEER_ENGINE, DUALMAP_PEER_INSTANCES,
// DUALMAP_LLMD_SIM(_PROFILE), DUALMAP_LLMD_EPP, DUALMAP_PEER_WORKLOADS,
// DUALMAP_PEER_REQUESTS, DUALMAP_PEER_TRACE, DUALMAP_PEER_PICKERS,
// DUALMAP_PEER_REPLICAS, DUALMAP_PEER_LOAD, DUALMAP_PEER_RUNS,
// DUALMAP_PEER_CAPACITY, DUALMAP_PEER_RAMP, DUALMAP_PEER_RAMP_REQUESTS,
// DUALMAP_PEER_NOQUEUE, DUALMAP_PEER_CLIENT, DUALMAP_PEER_CONCURRENCY,
// DUALMAP_PEER_OUT.
func TestPeerBench(t *testing.T) {
	if os.Getenv("DUALMAP_BENCH_PEER") == "" {
		t.Skip("set DUALMAP_BENCH_PEER=1 (make bench-peer) to measure")
	}
	eng := peerEnginesFromEnv(t)
	llmdBin := os.Getenv("DUALMAP_LLMD_EPP")
	requests := envInt(t, "DUALMAP_PEER_REQUESTS", 600)
	tracePath := cmpOr(os.Getenv("DUALMAP_PEER_TRACE"), filepath.Join(repoRoot, "..", "shared", "traces", "conversation_trace.jsonl"))
	noQueue := cmpOr(os.Getenv("DUALMAP_PEER_NOQUEUE"), "queue_budget_tokens: -1")
	var pickers []benchPicker
	for _, name := range strings.Split(cmpOr(os.Getenv("DUALMAP_PEER_PICKERS"), "dualmap,llm-d"), ",") {
		switch strings.TrimSpace(name) {
		case "dualmap":
			pickers = append(pickers, benchDualmap("dualmap", ""))
		case "dualmap-noqueue":
			pickers = append(pickers, benchDualmap("dualmap-noqueue", noQueue))
		case "round-robin":
			// dualmap's process with the round-robin policy: the
			// cache-blind baseline, behind the same Envoy.
			pickers = append(pickers, benchDualmapPolicy("round-robin", "round-robin", ""))
		case "llm-d":
			if llmdBin == "" {
				t.Fatal("picker llm-d needs DUALMAP_LLMD_EPP (bash scripts/llmd-epp.sh <llm-d-router checkout>)")
			}
			pickers = append(pickers, benchLLMD(llmdBin))
		default:
			t.Fatalf("DUALMAP_PEER_PICKERS: unknown picker %q (dualmap, dualmap-noqueue, round-robin, llm-d)", name)
		}
	}
	var replicas []int
	for _, f := range floats(t, "DUALMAP_PEER_REPLICAS", "1,3") {
		replicas = append(replicas, int(f))
	}
	percents := floats(t, "DUALMAP_PEER_LOAD", "30,70,100,150")
	runs := envInt(t, "DUALMAP_PEER_RUNS", 2)
	floorMode := cmpOr(os.Getenv("DUALMAP_PEER_FLOOR"), "on")
	switch floorMode {
	case "on", "off":
	case "only":
		runs = 0
	default:
		t.Fatalf("DUALMAP_PEER_FLOOR=%q: want on, off or only", floorMode)
	}
	ramp := floats(t, "DUALMAP_PEER_RAMP", "4,1.4,10")
	if len(ramp) != 3 {
		t.Fatalf("DUALMAP_PEER_RAMP=%q: want start,factor,steps", os.Getenv("DUALMAP_PEER_RAMP"))
	}
	rampRates, err := peerbench.RampRates(ramp[0], ramp[1], int(ramp[2]))
	if err != nil {
		t.Fatal(err)
	}
	rampRequests := envInt(t, "DUALMAP_PEER_RAMP_REQUESTS", 300)
	given := map[string]float64{}
	if v := os.Getenv("DUALMAP_PEER_CAPACITY"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, r, ok := strings.Cut(kv, ":")
			f, err := strconv.ParseFloat(r, 64)
			if !ok || err != nil || !(f > 0) {
				t.Fatalf("DUALMAP_PEER_CAPACITY=%q: want workload:rate,...", v)
			}
			given[k] = f
		}
	}
	out := cmpOr(os.Getenv("DUALMAP_PEER_OUT"), filepath.Join(repoRoot, "out", "peer-"+time.Now().UTC().Format("20060102-150405")))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	client := peerClient{name: cmpOr(os.Getenv("DUALMAP_PEER_CLIENT"), "replay"), concurrency: envInt(t, "DUALMAP_PEER_CONCURRENCY", 4096), outDir: out}

	var rows []peerbench.Row
	var capacities []map[string]any
	var floors []peerbench.Floor
	save := func() {
		b, _ := json.MarshalIndent(map[string]any{"engine": eng.kind, "instances": eng.n, "capacity": capacities, "floors": floors, "rows": rows}, "", "  ")
		if err := os.WriteFile(filepath.Join(out, "results.json"), b, 0o644); err != nil {
			t.Errorf("results: %v", err)
		}
	}
	for _, name := range strings.Split(cmpOr(os.Getenv("DUALMAP_PEER_WORKLOADS"), "conversation,shared-prefix,tool-agent"), ",") {
		w := benchWorkload(t, strings.TrimSpace(name), tracePath, requests)
		t.Logf("== %s on %d %s engines: %s; load average %s ==", w.Name, eng.n, eng.kind, w.Note, loadAvg())
		if floorMode != "off" {
			if f, ok := benchFloor(t, eng, w); ok {
				floors = append(floors, f)
				t.Logf("  TTFT floor p50 / p90 / p99 %.0f / %.0f / %.0f ms, unbounded-cache hit rate %.1f%% (no picker beats it at any load)",
					f.TTFTP50MS, f.TTFTP90MS, f.TTFTP99MS, 100*f.HitRate)
				save()
			}
		}
		if runs == 0 {
			continue
		}
		capacity, ok := given[w.Name]
		if !ok {
			capacity = benchCapacity(t, eng, w, rampRequests, rampRates, noQueue, llmdBin, client, &capacities)
		} else {
			t.Logf("  capacity %.1f requests/s (given by DUALMAP_PEER_CAPACITY)", capacity)
			capacities = append(capacities, map[string]any{"workload": w.Name, "capacity": capacity, "given": true})
		}
		rates, err := peerbench.RatesAt(capacity, percents)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		for _, reps := range replicas {
			for run := 1; run <= runs; run++ {
				for i, qps := range rates {
					for _, pk := range pickers {
						row, _ := benchRun(t, eng, pk, reps, w, qps, client, peerbench.Row{Percent: percents[i], Run: run})
						rows = append(rows, row)
						var md bytes.Buffer
						peerbench.Markdown(&md, []peerbench.Row{row})
						t.Logf("%s", strings.Split(md.String(), "\n")[2])
						save()
					}
				}
			}
		}
	}
	var md bytes.Buffer
	peerbench.Markdown(&md, rows)
	if len(floors) > 0 {
		md.WriteString("\nTTFT floors (no picker beats them at any load; peerbench.Floor):\n\n")
		peerbench.FloorMarkdown(&md, floors)
	}
	os.WriteFile(filepath.Join(out, "results.md"), md.Bytes(), 0o644)
	t.Logf("results in %s\n%s", out, md.String())
}

// benchWorkload builds the workload named name.
func benchWorkload(t testing.TB, name, tracePath string, requests int) peerbench.Workload {
	t.Helper()
	var w peerbench.Workload
	var err error
	switch name {
	case "conversation":
		w, err = peerbench.Conversation(tracePath, requests)
	case "shared-prefix":
		c := peerbench.DefaultSharedPrefix()
		// DUALMAP_PEER_REQUESTS changes the number of groups, not their
		// size: 600 requests are the 150 groups of 4.
		c.Groups = max(1, requests/c.PromptsPerGroup)
		w, err = peerbench.SharedPrefix(c)
	case "tool-agent":
		w, err = peerbench.ToolAgent(requests)
	default:
		t.Fatalf("DUALMAP_PEER_WORKLOADS: unknown workload %q (conversation, shared-prefix, tool-agent)", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// benchCapacity measures the setup's capacity on w with one replica: a
// ramp of rampRequests requests at each rate, with dualmap without its
// router queue and with llm-d's picker (when given), each until its first
// step that does not keep up (peerbench.RampStep.KeepsUp, or a median E2E
// over peerbench.MaxSlowdown times the first step's) twice in a row; the capacity
// is the highest rate both kept up with.
func benchCapacity(t testing.TB, eng peerEngines, w peerbench.Workload, n int, rates []float64, noQueue, llmdBin string, c peerClient, log *[]map[string]any) float64 {
	t.Helper()
	if c.name != "replay" {
		c.name = "replay" // the ramp needs completion times
	}
	short := w
	if n < len(w.Trace.Requests) {
		tr := *w.Trace
		tr.Requests = tr.Requests[:n]
		short.Trace = &tr
	}
	pks := []benchPicker{benchDualmap("dualmap-noqueue", noQueue)}
	if llmdBin != "" {
		pks = append(pks, benchLLMD(llmdBin))
	}
	capacity := -1.0
	for _, pk := range pks {
		var steps []peerbench.RampStep
		var base time.Duration
		for _, r := range rates {
			row, st := benchRun(t, eng, pk, 1, short, r, c, peerbench.Row{Run: 0})
			if len(steps) > 0 && (!st.KeepsUp() || peerbench.SlowerThan(st, base)) {
				// One stall of a shared machine is not a capacity: a step
				// that misses is run once more, and the second counts.
				t.Logf("  ramp %-16s %6.1f/s: E2E drift %.2f, %d failed, E2E p50 %.0f ms: missed, once more [load %s]", pk.name, r, st.Drift(), st.Failed, row.E2EP50MS, row.LoadAvg)
				row, st = benchRun(t, eng, pk, 1, short, r, c, peerbench.Row{Run: 0})
			}
			steps = append(steps, st)
			t.Logf("  ramp %-16s %6.1f/s: sent %.1f/s, E2E drift %.2f, %d failed, TTFT p50 %.0f ms p90 %.0f ms, E2E p50 %.0f ms, engines' cores %.2f [load %s]",
				pk.name, r, st.Sent, st.Drift(), st.Failed, row.TTFTP50MS, row.TTFTP90MS, row.E2EP50MS, row.EngineCPU, row.LoadAvg)
			*log = append(*log, map[string]any{"workload": w.Name, "picker": pk.name, "offered": r, "sent": st.Sent, "e2e_drift": st.Drift(), "failed": st.Failed,
				"ttft_p50_ms": row.TTFTP50MS, "ttft_p90_ms": row.TTFTP90MS, "engine_cpu_cores": row.EngineCPU, "load_avg": row.LoadAvg, "keeps_up": st.KeepsUp()})
			if len(steps) == 1 {
				base = time.Duration(row.E2EP50MS * float64(time.Millisecond))
			}
			if !st.KeepsUp() || peerbench.SlowerThan(st, base) {
				break
			}
		}
		rate, reached := peerbench.Capacity(steps)
		if !reached {
			t.Logf("  %s kept up at every rate of the ramp: its capacity is at least %.1f/s", pk.name, rate)
		}
		if capacity < 0 || rate < capacity {
			capacity = rate
		}
	}
	if capacity <= 0 {
		t.Fatalf("%s: no rate of the ramp %v kept up; lower DUALMAP_PEER_RAMP's start", w.Name, rates)
	}
	t.Logf("  capacity of %s: %.1f requests/s (the highest ramp rate every picker kept up with, %d requests a step, median E2E of the last quarter <= %.1fx the first quarter's and <= %.0fx the first step's, no failure)",
		w.Name, capacity, n, peerbench.MaxDrift, peerbench.MaxSlowdown)
	*log = append(*log, map[string]any{"workload": w.Name, "capacity": capacity})
	return capacity
}

// TestPeerHarness is the peer benchmark's smaller check, part of make
// test: the harness brought up on `dualmap engine` (or llm-d's simulator
// when DUALMAP_LLMD_SIM is set, DUALMAP_PEER_ENGINE choosing) with dualmap
// (one replica, then three sharing Redis) and, when DUALMAP_LLMD_EPP is
// set, llm-d's picker, replaying a small shared-prefix workload at 4
// requests/s: every request is served, and the engines' own counters
// report prefix-cache hits on the repeated system prompts. On llm-d's
// simulator no run may beat the workload's floor (benchFloor).
func TestPeerHarness(t *testing.T) {
	eng := peerEnginesFromEnv(t)
	if eng.kind == "llmd-sim" {
		eng.n = min(eng.n, 4)
	}
	c := peerbench.DefaultSharedPrefix()
	c.Groups, c.PromptsPerGroup, c.SystemTokens, c.QuestionTokens, c.OutputTokens = 3, 4, 512, 32, 8
	w, err := peerbench.SharedPrefix(c)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		pk       benchPicker
		replicas int
	}
	cases := []tc{{benchDualmap("dualmap", ""), 1}, {benchDualmap("dualmap", ""), 3}}
	if bin := os.Getenv("DUALMAP_LLMD_EPP"); bin != "" {
		cases = append(cases, tc{benchLLMD(bin), 1})
	}
	client := peerClient{name: "replay", concurrency: 64}
	floor, hasFloor := benchFloor(t, eng, w)
	if hasFloor {
		t.Logf("floor: TTFT p50 %.0f ms, unbounded-cache hit rate %.1f%%", floor.TTFTP50MS, 100*floor.HitRate)
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-%s-x%d", eng.kind, x.pk.name, x.replicas), func(t *testing.T) {
			row, _ := benchRun(t, eng, x.pk, x.replicas, w, 4, client, peerbench.Row{})
			t.Logf("%d requests, %d failed, TTFT p50 %.0f ms, engine hit rate %.1f%%, picker CPU %.2f ms/request", row.Requests, row.Failed, row.TTFTP50MS, 100*row.EngineHitRate, row.PickerCPUMSPerRequest)
			if row.OK != len(w.Trace.Requests) || row.Failed != 0 {
				t.Fatalf("%d of %d requests served, %d failed (%v)", row.OK, len(w.Trace.Requests), row.Failed, row.ByStatus)
			}
			// 12 prompts, 4 per 512-token system prompt (of 544 tokens):
			// a cache-aware picker sends a group's repeats where its system
			// prompt is cached, for up to 9*512/(12*544) = 71% hits;
			// spreading every group over four engines would give none.
			if row.EngineHitRate < 0.25 {
				t.Fatalf("engines report a prefix-cache hit rate of %.1f%% on repeated system prompts, want >= 25%%", 100*row.EngineHitRate)
			}
			if row.OutputTPS <= 0 {
				t.Fatalf("no output tokens reported (%v/s)", row.OutputTPS)
			}
			// No picker beats the floor: a run above its hit rate, or
			// below its median TTFT (less the simulator's jitter), means
			// the floor counts wrong.
			if hasFloor && (row.EngineHitRate > floor.HitRate+0.005 || row.TTFTP50MS < 0.9*floor.TTFTP50MS) {
				t.Fatalf("the run (hit rate %.1f%%, TTFT p50 %.0f ms) beats its floor (%.1f%%, %.0f ms)",
					100*row.EngineHitRate, row.TTFTP50MS, 100*floor.HitRate, floor.TTFTP50MS)
			}
		})
	}
}

// floorBlocks is the unbounded cache of the floor's simulator, in blocks:
// above every workload's prompt blocks in total (benchFloor checks).
const floorBlocks = 4_000_000

// benchFloor is w's TTFT floor on llm-d's simulator (peerbench.Floor):
// one simulator with the benchmark's profile, but an unbounded cache and
// no latency, gets w's requests one at a time in arrival order, the same
// prompts the runs send, straight to its port; its usage reports say how
// many tokens of each prompt were cached, and the profile's costs make
// them TTFTs. ok is false for an engine that is not the simulator.
func benchFloor(t testing.TB, eng peerEngines, w peerbench.Workload) (f peerbench.Floor, ok bool) {
	t.Helper()
	if eng.kind != "llmd-sim" {
		return peerbench.Floor{}, false
	}
	pf, err := os.Open(eng.profile)
	if err != nil {
		t.Fatal(err)
	}
	cost, err := peerbench.ParsePrefillCost(pf)
	pf.Close()
	if err != nil {
		t.Fatalf("%s: %v", eng.profile, err)
	}
	dir := t.TempDir()
	port := freePort(t)
	p := startProc(t, dir, "floor-engine", "env", "POD_IP=127.0.0.1", eng.bin, "--config", eng.profile, "--port", fmt.Sprint(port),
		"--prefill-overhead", "0s", "--prefill-time-per-token", "0s", "--prefill-time-std-dev", "0s",
		"--inter-token-latency", "0s", "--inter-token-latency-std-dev", "0s", "--time-factor-under-load", "1",
		"--kv-cache-size", fmt.Sprint(floorBlocks))
	defer func() {
		p.kill(syscall.SIGTERM)
		<-p.done
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, url+"/health", 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// One at a time, so each request starts after the one before it has
	// put its blocks in the cache; the rate only rescales the arrivals,
	// and the order is theirs.
	res, _, err := replay.Run(ctx, w.Trace, replay.Options{URL: url, QPS: 1000, Concurrency: 1,
		MaxOutput: 1, ScaleTokens: w.Scale, Seed: replaySeed, Model: "dualmap-sim", IgnoreEOS: true})
	if err != nil {
		t.Fatalf("%s floor: %v", w.Name, err)
	}
	var prompt int
	for _, r := range res {
		prompt += r.PromptTokens
	}
	if blocks := prompt/16 + len(res); blocks > floorBlocks {
		t.Fatalf("%s floor: %d prompt blocks do not fit the floor's cache of %d: it would evict", w.Name, blocks, floorBlocks)
	}
	f, err = peerbench.FloorOf(w.Name, res, cost)
	if err != nil {
		t.Fatalf("%s: %v\n%s", w.Name, err, tail(p.log, 20))
	}
	return f, true
}
