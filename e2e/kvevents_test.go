//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/tokenize"
)

// kvOffset puts each engine's KV-event publisher (and, one port above, its
// replay socket) at its HTTP port plus this offset: several engines on
// one host. With freePort's default range (24000 up to the kernel's
// ephemeral ports, 32767 by default) that is 15000-23767, below the range
// and above most well-known services' ports.
const kvOffset = -9000

// kvEngineArgs runs `dualmap engine` with a small cache (64 blocks of 16
// tokens, so that it evicts) publishing its KV events.
func kvEngineArgs(t *testing.T, dir string) func(i, port int) []string {
	prof := map[string]any{
		"name": "kv-small", "prefill_per_token_s": 5e-5, "decode_step_base_s": 0.002, "decode_per_seq_s": 0.0015,
		"kv_bytes_per_token": 2048, "hbm_cache_bytes": 2048 * 16 * 64, "dram_cache_bytes": 0,
		"max_batched_tokens": 2048, "max_num_seqs": 4, "max_model_len": 1024, "block_size": 16,
	}
	b, _ := json.Marshal(prof)
	path := filepath.Join(dir, "kv-small.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return func(i, port int) []string {
		for _, p := range []int{port + kvOffset, port + kvOffset + 1} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("KV-event port %d of engine %d not free: %v", p, i, err)
			}
			l.Close()
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		return []string{dualmapBin, "engine", "--listen", addr, "--time-scale", "50", "--name", addr, "--block-size", "16",
			"--profile", path, "--output-tokens", "4",
			"--kv-events", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset), "--kv-events-mode", "bind",
			"--kv-events-replay", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset+1)}
	}
}

// direct sends a chat straight to an engine, past the router (another
// router's traffic, as far as this one can tell).
func direct(t *testing.T, addr string, body []byte) {
	t.Helper()
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("direct request to %s: status %d", addr, resp.StatusCode)
	}
}

// routerMetric reads one series of the router's /metrics (0 if absent).
func routerMetric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == series {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// routerView is what /debug/instances says of one instance.
type routerView struct {
	CachedBlocks int
	ExactCache   bool
}

func debugInstance(t *testing.T, admin, id string) routerView {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/debug/instances")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string][]struct {
		ID string
		routerView
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, list := range out {
		for _, in := range list {
			if in.ID == id {
				return in.routerView
			}
		}
	}
	t.Fatalf("no instance %s in /debug/instances", id)
	return routerView{}
}

// fullBlocks is how many whole blocks of 16 tokens the router (and the
// engine) make of a chat body of chatBody's shape.
func fullBlocks(t *testing.T, system, user string) int {
	pr, err := tokenize.NewPrompter(tokenize.Bytes(), tokenize.Config{BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	var p tokenize.Prompt
	if err := pr.Messages([]tokenize.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}, &p); err != nil {
		t.Fatal(err)
	}
	return p.Tokens / 16
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(faultWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, faultWait)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// TestKVEventsSteerAndRecover routes through Envoy to two `dualmap
// engine`s that publish their KV-cache events. The router learns of a
// prefix another client put on engine Y (it never routed it there), and
// of engine X evicting the prefix it did route there: the next request
// with that prefix goes to Y, with the prefix cached. Y then restarts
// (its sequence starts over): the router purges what Y held, so nothing
// claims the prefix any more. Finally the router itself restarts and
// rebuilds its exact view from the engines' replay.
func TestKVEventsSteerAndRecover(t *testing.T) {
	dir := t.TempDir()
	s := startStack(t, stackOptions{engines: 2, engineArgs: kvEngineArgs(t, dir),
		poolConfig: fmt.Sprintf("    kv_events: {enabled: true, port_offset: %d, replay_offset: %d}\n", kvOffset, kvOffset+1)})
	admin := s.routers[0].admin
	stored := func() float64 {
		return routerMetric(t, admin, `dualmap_kv_event_blocks_total{outcome="stored",pool="default"}`)
	}
	sys := "You are the prefix. " + strings.Repeat("Shared instructions for every request. ", 12)
	first := s.post("/v1/chat/completions", chatBody(sys, "q1", false, 4))
	if first.status != 200 || first.engine == "" {
		t.Fatalf("first request: %v", first)
	}
	x := first.engine
	y := s.engines[0].addr
	if y == x {
		y = s.engines[1].addr
	}
	want := float64(fullBlocks(t, sys, "q1"))
	direct(t, y, chatBody(sys, "q1", false, 4)) // Y caches the prefix behind the router's back
	want += float64(fullBlocks(t, sys, "q1"))
	// X evicts it: four other prompts of about 30 blocks each go through its 64.
	for i := range 4 {
		other := fmt.Sprintf("Other %d. ", i) + strings.Repeat(fmt.Sprintf("filler %d text ", i), 128)
		direct(t, x, chatBody(other, "q", false, 4))
		want += float64(fullBlocks(t, other, "q"))
	}
	waitUntil(t, fmt.Sprintf("the router has applied %g stored blocks", want), func() bool { return stored() >= want })
	if vx, vy := debugInstance(t, admin, x), debugInstance(t, admin, y); !vx.ExactCache || !vy.ExactCache {
		t.Fatalf("views: %s %+v, %s %+v; want both exact", x, vx, y, vy)
	}
	if removed := routerMetric(t, admin, `dualmap_kv_event_blocks_total{outcome="removed",pool="default"}`); removed == 0 {
		t.Fatalf("no eviction reported by %s", x)
	}
	r := s.post("/v1/chat/completions", chatBody(sys, "q2", false, 4))
	if r.status != 200 || r.engine != y || r.cached == 0 {
		t.Fatalf("after X's eviction: %v, cached %d; want served by %s (which holds the prefix) with it cached", r, r.cached, y)
	}
	t.Logf("the prefix went to %s, which held it (%d tokens cached); %s had evicted it", y, r.cached, x)

	// Y restarts: a new process, sequence from 0, empty cache.
	yi := 0
	if s.engines[1].addr == y {
		yi = 1
	}
	e := s.engines[yi]
	args := e.proc.cmd.Args
	e.proc.kill(syscall.SIGKILL)
	<-e.proc.done
	e.proc = startProc(t, s.dir, "engine-restarted", args...)
	waitHTTP(t, "http://"+y+"/health", 60*time.Second)
	// Prompts straight to Y until the router has heard the new process
	// (it may have missed the first batches while re-dialling: replay
	// brings them) and holds exactly what Y cached since its restart.
	held, n := 0, 0
	var q string
	last := time.Time{}
	waitUntil(t, "the router purged the restarted engine and holds its new prompts only", func() bool {
		if time.Since(last) > 500*time.Millisecond && n < 10 {
			q = fmt.Sprintf("New prompt %d after the restart. ", n) + strings.Repeat("fresh words ", 12)
			direct(t, y, chatBody(q, "q", false, 4))
			held += fullBlocks(t, q, "q")
			n, last = n+1, time.Now()
		}
		v := debugInstance(t, admin, y)
		return v.ExactCache && v.CachedBlocks == held &&
			routerMetric(t, admin, `dualmap_kv_event_restarts_total{pool="default"}`) >= 1
	})
	waitUntil(t, "the restarted engine healthy in the router", func() bool {
		r := s.post("/v1/chat/completions", chatBody(q, "q", false, 4))
		return r.status == 200 && r.engine == y && r.cached > 0
	})
	nobody := s.post("/v1/chat/completions", chatBody(sys, "q3", false, 4))
	if nobody.status != 200 || nobody.cached != 0 {
		t.Fatalf("the prefix after Y's restart: %v, cached %d; want no engine holding it (0 cached)", nobody, nobody.cached)
	}
	z := nobody.engine // holds the prefix now

	// The router restarts: its view is rebuilt from replay.
	s.routers[0].kill(syscall.SIGKILL)
	<-s.routers[0].done
	s.restartRouter(t, 0, 1)
	direct(t, z, chatBody("Wake the stream. "+strings.Repeat("w ", 40), "q", false, 4))
	waitUntil(t, "the restarted router's exact view of "+z, func() bool { return debugInstance(t, admin, z).ExactCache })
	if ok := routerMetric(t, admin, `dualmap_kv_event_replays_total{pool="default",result="ok"}`); ok < 1 {
		t.Fatalf("no successful replay after the router's restart")
	}
	again := s.post("/v1/chat/completions", chatBody(sys, "q4", false, 4))
	if again.status != 200 || again.engine != z || again.cached == 0 {
		t.Fatalf("after the router's restart: %v, cached %d; want %s with the prefix cached", again, again.cached, z)
	}
}
