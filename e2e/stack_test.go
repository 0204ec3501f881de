//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var systemPrompt = strings.Repeat("You are a meticulous assistant for a logistics company. ", 60)

// Requests sharing a prefix land on the instance the router chose, which
// serves them from its prefix cache; unrelated prefixes spread.
func TestAffinityAndSpread(t *testing.T) {
	s := startStack(t, stackOptions{})
	first := s.post("/v1/chat/completions", chatBody(systemPrompt, "Where is order 1?", false, 8))
	if first.status != 200 || first.instance == "" {
		t.Fatalf("first request: %v", first)
	}
	for i := 2; i <= 6; i++ {
		r := s.post("/v1/chat/completions", chatBody(systemPrompt, fmt.Sprintf("Where is order %d?", i), false, 8))
		if r.status != 200 {
			t.Fatalf("request %d: %v", i, r)
		}
		if r.engine != r.instance {
			t.Fatalf("request %d decided %s but was served by %s: the pin was not honoured", i, r.instance, r.engine)
		}
		if r.instance != first.instance {
			t.Errorf("request %d went to %s, want %s (same prefix)", i, r.instance, first.instance)
		}
		if r.cached == 0 {
			t.Errorf("request %d: cached_tokens = 0, want the shared system prompt from the prefix cache", i)
		}
	}
	used := map[string]int{}
	for i := 0; i < 24; i++ {
		sys := fmt.Sprintf("Conversation %d. %s", i*7919, strings.Repeat(fmt.Sprintf("topic-%d ", i), 200))
		r := s.post("/v1/chat/completions", chatBody(sys, "hello", false, 4))
		if r.status != 200 || r.engine != r.instance {
			t.Fatalf("unrelated request %d: %v", i, r)
		}
		used[r.engine]++
	}
	t.Logf("24 unrelated prefixes over the engines: %v", used)
	if len(used) < 3 {
		t.Errorf("unrelated prefixes used %d engines, want >= 3", len(used))
	}
}

func TestStreamingAndNonStreaming(t *testing.T) {
	s := startStack(t, stackOptions{})
	r := s.post("/v1/chat/completions", chatBody(systemPrompt, "stream please", true, 32))
	if r.status != 200 || r.err != nil || !r.done || r.chunks < 16 {
		t.Fatalf("streaming: %v, %d content chunks, done %v; want 200, >= 16 chunks, [DONE]", r, r.chunks, r.done)
	}
	if ct := r.header.Get("content-type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("content-type = %q", ct)
	}
	n := s.post("/v1/chat/completions", chatBody(systemPrompt, "no stream", false, 8))
	if n.status != 200 || !strings.Contains(string(n.body), `"choices"`) || !strings.Contains(string(n.body), `"usage"`) {
		t.Fatalf("non-streaming: %v", n)
	}
	c := s.post("/v1/completions", []byte(`{"model":"dualmap-sim","prompt":"Once upon a time","max_tokens":5}`))
	if c.status != 200 || c.engine != c.instance {
		t.Fatalf("completions: %v", c)
	}
	m, err := client.Get(s.url + "/v1/models")
	if err != nil || m.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %v %v", m, err)
	}
	m.Body.Close()
}

func TestBadInputThroughEnvoy(t *testing.T) {
	s := startStack(t, stackOptions{maxBodyBytes: 64 << 10})
	tests := []struct {
		name   string
		body   []byte
		ctype  string
		status int
	}{
		{"invalid json", []byte(`{"model":`), "application/json", 400},
		{"missing messages", []byte(`{"model":"m"}`), "application/json", 400},
		{"oversized", chatBody(strings.Repeat("x", 100<<10), "hi", false, 4), "application/json", 413},
		{"text body", []byte(`hello`), "text/plain", 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.post("/v1/chat/completions", tt.body, "content-type", tt.ctype)
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d: %v", r.status, tt.status, r)
			}
			if !strings.Contains(string(r.body), `"error"`) {
				t.Errorf("body %q is not an OpenAI error", r.body)
			}
		})
	}
	// A client-chosen destination never decides: every request is served by
	// the instance the router chose, whatever the header said.
	for i := 0; i < 12; i++ {
		target := s.engines[i%len(s.engines)].addr
		r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("%d %s", i, systemPrompt), "hi", false, 4),
			"x-gateway-destination-endpoint", target)
		if r.status != 200 || r.engine != r.instance {
			t.Fatalf("request %d with header %s: %v", i, target, r)
		}
	}
}

// sample is one request sent by underLoad: which client sent it, when it
// started and what came back.
type sample struct {
	client int
	start  time.Time
	reply
}

func (r reply) failed() bool { return r.err != nil || r.status != 200 }

// loadClients is how many clients underLoad runs.
const loadClients = 4

// faultWait bounds each of underLoad's waits: for the condition the fault
// needs before it strikes, and for the requests a test needs after it.
const faultWait = 30 * time.Second

// loadRun is one underLoad run: loadClients clients, each sending one
// request at a time (prompt i of client w from prompt(w, i)).
type loadRun struct {
	prompt func(w, i int) string
	// ready must hold over the requests answered so far before the fault
	// strikes (nil: every client has had a request served), so that what a
	// test needs to be mid-run is certain instead of checked afterwards.
	ready func(done []sample) bool
	// fault strikes, given the requests answered so far.
	fault func(done []sample)
	// after is how long the load goes on once the fault returned; then the
	// run also waits until enough (nil: always) holds over the requests
	// that started after the fault.
	after  time.Duration
	enough func(later []sample) bool
}

// underLoad runs r against s. It returns every request sent and the time
// the fault returned: a request that started before then may have been in
// flight when the fault struck. A condition that does not hold within
// faultWait fails the test, saying what was seen.
func underLoad(t *testing.T, s *stack, r loadRun) ([]sample, time.Time) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var samples []sample
	stop := make(chan struct{})
	for w := 0; w < loadClients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				rep := s.post("/v1/chat/completions", chatBody(r.prompt(w, i), "hi", false, 4))
				mu.Lock()
				samples = append(samples, sample{client: w, start: start, reply: rep})
				mu.Unlock()
			}
		}(w)
	}
	snapshot := func() []sample {
		mu.Lock()
		defer mu.Unlock()
		return append([]sample(nil), samples...)
	}
	// finish stops the clients; deferred too, so that a Fatalf (here or in
	// fault) does not leave them running.
	var once sync.Once
	finish := func() []sample {
		once.Do(func() {
			close(stop)
			wg.Wait()
		})
		return snapshot()
	}
	defer finish()
	ready := r.ready
	if ready == nil {
		ready = everyClientServed
	}
	if !waitLoad(func() bool { return ready(snapshot()) }) {
		got := finish()
		t.Fatalf("the fault's precondition did not hold within %v of load: %d requests, served by %v", faultWait, len(got), servedBy(got))
	}
	r.fault(snapshot())
	faultAt := time.Now()
	time.Sleep(r.after)
	if r.enough != nil && !waitLoad(func() bool { return r.enough(startedAfter(snapshot(), faultAt)) }) {
		got := finish()
		t.Fatalf("the requests needed after the fault were not sent within %v: %d after it, served by %v", faultWait, len(startedAfter(got, faultAt)), servedBy(startedAfter(got, faultAt)))
	}
	return finish(), faultAt
}

// waitLoad polls cond every 10ms for at most faultWait.
func waitLoad(cond func() bool) bool {
	deadline := time.Now().Add(faultWait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// everyClientServed reports whether each client has had a request served.
func everyClientServed(done []sample) bool {
	seen := map[int]bool{}
	for _, x := range done {
		if !x.failed() {
			seen[x.client] = true
		}
	}
	return len(seen) == loadClients
}

// servedBy counts the served requests per instance the router chose.
func servedBy(done []sample) map[string]int {
	n := map[string]int{}
	for _, x := range done {
		if !x.failed() {
			n[x.instance]++
		}
	}
	return n
}

// busiestServed returns the instance that served the most of done (ties to
// the smaller address) and how many.
func busiestServed(done []sample) (string, int) {
	best, most := "", 0
	for e, n := range servedBy(done) {
		if n > most || n == most && e < best {
			best, most = e, n
		}
	}
	return best, most
}

// killedEngine is the outcome of killBusiest.
type killedEngine struct {
	*engineProc
	served  int // requests it served in the run before the kill
	samples []sample
	faultAt time.Time
}

// killBusiest runs the load of prompt, kills (SIGKILL) the engine that
// has served the most of it once one has served two requests, and keeps
// the load going for after: the kill is mid-run by construction.
func killBusiest(t *testing.T, s *stack, prompt func(w, i int) string, after time.Duration) killedEngine {
	t.Helper()
	var k killedEngine
	k.samples, k.faultAt = underLoad(t, s, loadRun{
		prompt: prompt,
		ready: func(done []sample) bool {
			_, n := busiestServed(done)
			return n >= 2
		},
		fault: func(done []sample) {
			addr, n := busiestServed(done)
			for _, e := range s.engines {
				if e.addr == addr {
					k.engineProc, k.served = e, n
				}
			}
			if k.engineProc == nil {
				t.Fatalf("the busiest instance %s is not one of the stack's engines", addr)
			}
			k.killNow()
		},
		after: after,
	})
	return k
}

// waitUnhealthy waits, at most faultWait, until every router of s reports
// instance addr out of rotation (dualmap_instance_healthy 0 on /metrics),
// so that what a test asserts about later requests does not depend on how
// soon a loaded machine runs the health check.
func waitUnhealthy(t *testing.T, s *stack, addr string) {
	t.Helper()
	want := `instance="` + addr + `"`
	down := func(r *routerProc) bool {
		resp, err := client.Get("http://" + r.admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "dualmap_instance_healthy{") && strings.Contains(line, want) {
				return strings.HasSuffix(line, " 0")
			}
		}
		return false
	}
	for _, r := range s.routers {
		if !waitLoad(func() bool { return down(r) }) {
			t.Fatalf("router %s still has %s in rotation %v after it died", r.admin, addr, faultWait)
		}
	}
}

// startedAfter returns the samples that started at or after at.
func startedAfter(done []sample, at time.Time) []sample {
	var later []sample
	for _, x := range done {
		if !x.start.Before(at) {
			later = append(later, x)
		}
	}
	return later
}

// checkFailures fails t unless the only failed requests are ones that
// started before faultAt (in flight when the fault struck), at most one
// per client. It returns how many failed.
func checkFailures(t *testing.T, samples []sample, faultAt time.Time) int {
	t.Helper()
	failed, perClient := 0, map[int]int{}
	var late []sample
	for _, x := range samples {
		if !x.failed() {
			continue
		}
		failed++
		perClient[x.client]++
		if !x.start.Before(faultAt) {
			late = append(late, x)
		}
	}
	for i, x := range late {
		if i == 3 {
			t.Errorf("... %d requests that started after the fault failed in all", len(late))
			break
		}
		t.Errorf("client %d: a request started %v after the fault failed: %v", x.client, x.start.Sub(faultAt).Round(time.Millisecond), x.reply)
	}
	for c := range loadClients {
		if n := perClient[c]; n > 1 {
			t.Errorf("client %d saw %d failures, want at most 1 (its request in flight when the fault struck)", c, n)
		}
	}
	return failed
}

// busiest returns the engine the router chose most often for the prompts
// of underLoad's first round of requests, sending each once.
func busiest(t *testing.T, s *stack, prompt func(w, i int) string) string {
	t.Helper()
	chosen := map[string]int{}
	for w := 0; w < loadClients; w++ {
		for i := 0; i < 8; i++ {
			r := s.post("/v1/chat/completions", chatBody(prompt(w, i), "hi", false, 4))
			if r.failed() {
				t.Fatalf("warm-up request: %v", r)
			}
			chosen[r.instance]++
		}
	}
	best := ""
	for e, n := range chosen {
		if best == "" || n > chosen[best] || n == chosen[best] && e < best {
			best = e
		}
	}
	return best
}

// An engine that refuses inference at the connection level while its
// health check stays green (httpengine's refuse_inference fault: connect
// is refused, the connections that carried inference are reset). The
// router keeps choosing it whenever its backoff ends (the health check
// brings it back), so its requests must be saved by failover: Envoy's
// route retries once on connect-failure, reset-before-request,
// refused-stream and reset (envoy/front-proxy.yaml), and the override_host
// policy sends the retry to the second address of
// x-gateway-destination-endpoint, the router's fallback. A refused connect
// is retried, and so is a request reset before its response began; one
// whose response had begun is not (Envoy retries only before then). So at
// most the requests streaming from the engine when the fault strikes fail,
// at most one per client, and every later request succeeds; those the
// router sent to the engine are served by their fallback.
func TestEngineFailover(t *testing.T) {
	s := startStack(t, stackOptions{})
	prompt := func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%8, systemPrompt) }
	victim := busiest(t, s, prompt)
	// The fault strikes once the victim has served in this run, and the
	// run lasts until a request chosen for it after the fault was served
	// by its fallback (so failover is exercised, not hoped for).
	samples, faultAt := underLoad(t, s, loadRun{
		prompt: prompt,
		ready:  func(done []sample) bool { return servedBy(done)[victim] > 0 },
		fault: func([]sample) {
			resp, err := client.Post("http://"+victim+"/admin/fault", "application/json", strings.NewReader(`{"refuse_inference":true}`))
			if err != nil {
				t.Fatalf("setting the fault on %s: %v", victim, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("setting the fault on %s: status %d", victim, resp.StatusCode)
			}
		},
		after: 4 * time.Second,
		enough: func(later []sample) bool {
			for _, x := range later {
				if !x.failed() && x.instance == victim && x.engine != victim {
					return true
				}
			}
			return false
		},
	})
	failed := checkFailures(t, samples, faultAt)
	failovers, chosenAfter := 0, 0
	for _, x := range samples {
		if !x.start.Before(faultAt) && x.instance == victim {
			chosenAfter++
		}
		if x.failed() {
			continue
		}
		primary, fallback, _ := strings.Cut(x.header.Get("x-engine-destination"), ",")
		if x.instance != primary {
			t.Errorf("decision %s but destination %q: the router's header was not the pin", x.instance, x.header.Get("x-engine-destination"))
		}
		switch x.engine {
		case primary:
			if x.engine == victim && !x.start.Before(faultAt) {
				t.Errorf("%s served a request that started after it began refusing inference: %v", victim, x.reply)
			}
		case fallback:
			failovers++
			if primary != victim {
				t.Errorf("failover away from %s, which never failed: %v", primary, x.reply)
			}
		default:
			t.Errorf("served by %s, neither the primary nor the fallback of %q", x.engine, x.header.Get("x-engine-destination"))
		}
	}
	t.Logf("%s refusing inference, health green: %d requests, %d failed, %d chosen for it after the fault, %d served by their fallback",
		victim, len(samples), failed, chosenAfter, failovers)
	if failovers == 0 {
		t.Errorf("no request was served by its fallback: failover was not exercised (%d requests chosen for %s after the fault)", chosenAfter, victim)
	}
}

// An engine killed mid-run: the requests it was serving fail, at most one
// per client, and no later request fails (until the router notices, a
// request sent to the dead engine is refused and retried on its fallback).
// Once the router has noticed, it no longer chooses the engine.
func TestEngineKilled(t *testing.T) {
	s := startStack(t, stackOptions{})
	prompt := func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%8, systemPrompt) }
	victim := killBusiest(t, s, prompt, 2*time.Second)
	samples, faultAt := victim.samples, victim.faultAt
	failed := checkFailures(t, samples, faultAt)
	t.Logf("engine %s killed mid-run, after it served %d requests: %d of %d requests failed", victim.addr, victim.served, failed, len(samples))
	// The health check runs every 200ms; wait until the routers know.
	waitUnhealthy(t, s, victim.addr)
	for i := 0; i < 20; i++ {
		r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("after %d %s", i, systemPrompt), "hi", false, 4))
		if r.failed() || r.instance == victim.addr {
			t.Fatalf("after the kill: %v", r)
		}
	}
}

// A router replica killed (SIGKILL): the requests whose ext_proc stream it
// held fail, at most one per client, and no later request fails: a later
// stream that Envoy still sends to the dead replica gets a refused connect,
// which the ext_proc filter's gRPC retry policy sends to the live replica,
// and Envoy's outlier detection on the router cluster
// (consecutive_local_origin_failure: 1) ejects the dead replica at its first
// local-origin failure, before its active health check (every second)
// would. (Before the retry policy, about one run in eight lost a request
// that started just after the kill: Envoy's second worker had not yet
// heard of the ejection.)
func TestRouterReplicaKilled(t *testing.T) {
	s := startStack(t, stackOptions{routers: 2})
	samples, faultAt := underLoad(t, s, loadRun{
		prompt: func(w, i int) string { return fmt.Sprintf("w%d %d %s", w, i, systemPrompt) },
		fault:  func([]sample) { s.routers[0].killNow() },
		after:  3 * time.Second,
	})
	failed := checkFailures(t, samples, faultAt)
	t.Logf("router replica killed (SIGKILL) mid-run: %d of %d requests failed", failed, len(samples))
	// Wait until Envoy has taken the dead replica out (ejected or failed
	// its health check) rather than guess how long that takes.
	key := "dualmap::" + s.routers[0].grpc + "::health_flags::"
	out := func() bool {
		for _, line := range strings.Split(s.envoyGet(t, "/clusters"), "\n") {
			if strings.HasPrefix(line, key) {
				return strings.TrimPrefix(line, key) != "healthy"
			}
		}
		return false
	}
	if !waitLoad(out) {
		t.Fatalf("Envoy still counts the killed replica %s healthy after %v:\n%s", s.routers[0].grpc, faultWait, s.envoyGet(t, "/clusters"))
	}
	for i := 0; i < 20; i++ {
		if r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("later %d", i), "hi", false, 4)); r.status != 200 {
			t.Fatalf("after the replica died: %v", r)
		}
	}
}

// A router replica killed while no request is in flight: nothing may fail.
// The first stream Envoy opens to the dead replica gets a refused connect
// before outlier detection or the health check has taken the replica out;
// the ext_proc filter's gRPC retry policy (envoy/*.yaml: connect-failure,
// another host) sends that stream to the live replica. Without it, that
// request fails with a 500.
func TestRouterReplicaKilledIdle(t *testing.T) {
	s := startStack(t, stackOptions{routers: 2})
	// Both replicas have served, so Envoy holds connections to both.
	seen := map[string]bool{}
	for i := 0; len(seen) < 2; i++ {
		if i == 200 {
			t.Fatalf("200 requests and not both replicas served a stream")
		}
		if r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("warm %d", i), "hi", false, 4)); r.status != 200 {
			t.Fatalf("warm-up: %v", r)
		}
		for _, rt := range s.routers {
			if routerSeries(t, rt, "dualmap_decisions_total") > 0 {
				seen[rt.grpc] = true
			}
		}
	}
	s.routers[0].killNow()
	retriesBefore := s.envoyStat(t, "cluster.dualmap.upstream_rq_retry")
	for i := 0; i < 8; i++ {
		if r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("after %d", i), "hi", false, 4)); r.status != 200 {
			t.Fatalf("request %d after the idle replica was killed: %v\nEnvoy's dualmap cluster:\n%s", i, r, s.envoyGet(t, "/clusters"))
		}
	}
	t.Logf("8 requests after the kill served; Envoy retried %d ext_proc streams", s.envoyStat(t, "cluster.dualmap.upstream_rq_retry")-retriesBefore)
}

// The official OpenAI Python SDK as the client, streaming and not.
func TestOpenAIPythonSDK(t *testing.T) {
	python := filepath.Join(filepath.Dir(envoyBin), "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no python beside envoy (%s): scripts/envoy.sh installs the SDK there", python)
	}
	s := startStack(t, stackOptions{})
	script := `
import sys
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
r = c.chat.completions.create(model="dualmap-sim", messages=[{"role": "user", "content": "hello"}], max_tokens=8)
assert r.choices[0].message.content, r
print("non-streaming ok", r.usage.prompt_tokens)
n = 0
for ch in c.chat.completions.create(model="dualmap-sim", messages=[{"role": "user", "content": "hello"}], max_tokens=8, stream=True):
    if ch.choices and ch.choices[0].delta.content:
        n += 1
assert n > 0
print("streaming ok", n)
try:
    c.chat.completions.create(model="dualmap-sim", messages=[], max_tokens=8)
    raise SystemExit("empty messages accepted")
except Exception as e:
    assert getattr(e, "status_code", None) == 400, e
    print("bad request ok")
`
	out, err := exec.Command(python, "-c", script, s.url).CombinedOutput()
	if err != nil {
		t.Fatalf("openai SDK: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// Two router replicas sharing state through Redis; Redis killed and
// restarted under traffic: no request fails.
func TestRedisRestartedUnderTraffic(t *testing.T) {
	dir := t.TempDir()
	rd := startRedis(t, dir)
	s := startStack(t, stackOptions{routers: 2, redis: rd.addr})
	samples, _ := underLoad(t, s, loadRun{
		prompt: func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%16, systemPrompt) },
		fault: func([]sample) {
			rd.p.killNow()
			time.Sleep(time.Second)
			rd.start()
		},
		after: 3 * time.Second,
	})
	failed := 0
	for _, x := range samples {
		if x.failed() {
			failed++
		}
	}
	t.Logf("Redis killed and restarted under traffic: %d of %d requests failed", failed, len(samples))
	if failed != 0 {
		t.Errorf("%d requests failed while Redis restarted, want 0", failed)
	}
}

// The shipped Envoy closes an idle connection to an engine on its own,
// before the engines' keep-alive ends (TestShippedEnvoyClosesIdleEngine-
// ConnectionsFirst checks the settings; this checks that a real Envoy
// acts on them).
func TestEnvoyClosesIdleEngineConnections(t *testing.T) {
	s := startStack(t, stackOptions{})
	if r := s.post("/v1/chat/completions", chatBody("idle "+systemPrompt, "hi", false, 4)); r.failed() {
		t.Fatalf("request: %v", r)
	}
	const stat = "cluster.model_servers.upstream_cx_idle_timeout"
	start := time.Now()
	for s.envoyStat(t, stat) == 0 {
		if time.Since(start) > 2*engineKeepAlive {
			t.Fatalf("%s still 0 after %v: Envoy keeps idle engine connections open (its default is 1 h)", stat, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("Envoy closed its idle engine connection after %v", time.Since(start).Round(100*time.Millisecond))
}
