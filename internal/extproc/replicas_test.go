package extproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// redisServer runs a real redis-server on a free loopback port.
func redisServer(t testing.TB) string {
	addr, _, _ := redisServerCtl(t)
	return addr
}

// redisServerCtl also returns functions that kill (SIGKILL) and restart it
// on the same port. extra are more redis-server arguments.
func redisServerCtl(t testing.TB, extra ...string) (string, func(), func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("DUALMAP_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not found and DUALMAP_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server not found (apt-get install -y redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var cmd *exec.Cmd
	launch := func() {
		args := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, extra...)
		cmd = exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("redis-server did not start")
	}
	kill := func() {
		if cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
			cmd = nil
		}
	}
	launch()
	t.Cleanup(kill)
	return addr, kill, launch
}

// Redis killed and restarted while replicas route: no request fails, and
// agreement comes back after the restart.
func TestRedisRestartMidRun(t *testing.T) {
	addr, kill, restart := redisServerCtl(t)
	var b strings.Builder
	b.WriteString("pools:\n  - instances:\n")
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, "      - address: %q\n", healthyInstance(t))
	}
	fmt.Fprintf(&b, "state:\n  backend: redis\n  redis: {addrs: [%q], heartbeat: 50ms}\n", addr)
	a := start(t, parseConfig(t, b.String()), true)
	bb := start(t, parseConfig(t, b.String()), true)
	send := func(ts *testServer, user string) string {
		c := ts.open(t)
		defer c.close()
		r := ts.post(t, c, "/v1/chat/completions", chat("m", user, false))
		dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
		if dest == "" {
			t.Fatalf("request %q failed while Redis was down: %v", user, r)
		}
		c.responseHeaders(t, "200")
		return strings.Split(dest, ",")[0]
	}
	send(a, "warm up")
	kill()
	for i := 0; i < 40; i++ { // every request still gets a decision
		send(a, fmt.Sprintf("during outage %d", i))
		send(bb, fmt.Sprintf("during outage b %d", i))
	}
	restart()
	// After the restart, a dispatch on a reaches b's cache index again.
	probe := strings.Repeat("after the restart ", 200)
	first := send(a, probe)
	waitFor(t, "b learns a's dispatch after the Redis restart", func() bool {
		d, err := bb.srv.pools.Pools()[0].Scheduler().(*scheduler.Scheduler).Pick(probeRequest(t, bb, probe))
		return err == nil && d.Instance == first && d.CachedTokens > 0
	})
}

// Three router replicas sharing Redis: a prefix routed by one is found
// cached on the same instance by the others, and each sees the others'
// load.
func TestReplicasShareStateThroughRedis(t *testing.T) {
	addr := redisServer(t)
	var b strings.Builder
	b.WriteString("pools:\n  - instances:\n")
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, "      - address: %q\n", healthyInstance(t))
	}
	b.WriteString("routing: {debug_headers: true}\n")
	fmt.Fprintf(&b, "state:\n  backend: redis\n  redis: {addrs: [%q], heartbeat: 50ms}\n", addr)
	cfgYAML := b.String()
	var reps []*testServer
	for i := 0; i < 3; i++ {
		reps = append(reps, start(t, parseConfig(t, cfgYAML), true))
	}
	// Replica 0 routes a conversation (and keeps it running: load).
	c := reps[0].open(t)
	// A system prompt of ~860 tokens (byte approximation): the 512-token
	// key covers it, so both questions share a key.
	long := func(q string) string {
		return strings.Replace(chat("m", q, true), strings.Repeat("You are a helpful assistant. ", 40),
			strings.Repeat("You are a helpful assistant for the travel desk. ", 70), 1)
	}
	r := reps[0].post(t, c, "/v1/chat/completions", long("first question"))
	first := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
	if first == "" {
		t.Fatalf("no decision: %v", r)
	}
	waitFor(t, "replicas 1 and 2 see the prefix cached on "+first, func() bool {
		for _, rep := range reps[1:] {
			for _, st := range rep.srv.pools.Pools()[0].Instances() {
				if st.ID == first && st.CachedBlocks == 0 {
					return false
				}
			}
		}
		return true
	})
	waitFor(t, "replica 1 sees replica 0's load on "+first, func() bool {
		for _, st := range reps[1].srv.pools.Pools()[0].Instances() {
			if st.ID == first {
				return st.Remote.Running == 1
			}
		}
		return false
	})
	for i, rep := range reps[1:] {
		c2 := rep.open(t)
		r2 := rep.post(t, c2, "/v1/chat/completions", long("second question"))
		got := strings.Split(setHeader(r2.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
		rr := c2.responseHeaders(t, "200")
		cached := setHeader(rr.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-dualmap-cached-tokens")
		c2.close()
		if got != first || cached == "0" {
			t.Errorf("replica %d routed the shared prefix to %s with %s cached tokens, want %s with the prefix cached", i+1, got, cached, first)
		}
	}
	c.close()
}

// probeRequest tokenizes a chat the way the body phase does.
func probeRequest(t *testing.T, ts *testServer, user string) *scheduler.Request {
	body, err := openai.Parse("POST", "/v1/chat/completions", "application/json", []byte(chat("m", user, false)), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ts.srv.pools.Pools()[0].Tokenize(body, pool.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
