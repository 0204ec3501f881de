//go:build e2e

package e2e

import (
	"fmt"
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

// underLoad sends requests from 4 clients for d (prompt i of client w from
// prompt(w, i)), runs fault after a second, and returns failed and total.
func underLoad(s *stack, d time.Duration, prompt func(w, i int) string, fault func()) (failed, total int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				r := s.post("/v1/chat/completions", chatBody(prompt(w, i), "hi", false, 4))
				mu.Lock()
				total++
				if r.status != 200 {
					failed++
				}
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(time.Second)
	fault()
	wg.Wait()
	return failed, total
}

// An engine killed mid-run: its requests fail over to the fallback
// endpoint and the router stops choosing it.
func TestEngineKilled(t *testing.T) {
	s := startStack(t, stackOptions{})
	victim := s.engines[0]
	failed, total := underLoad(s, 3*time.Second, func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%8, systemPrompt) }, victim.killNow)
	t.Logf("engine %s killed mid-run: %d of %d requests failed", victim.addr, failed, total)
	// After the router noticed, nothing goes to the dead engine and nothing fails.
	time.Sleep(time.Second)
	for i := 0; i < 20; i++ {
		r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("after %d %s", i, systemPrompt), "hi", false, 4))
		if r.status != 200 || r.engine == victim.addr {
			t.Fatalf("after the kill: %v", r)
		}
	}
	if failed > total/4 {
		t.Errorf("%d of %d requests failed while an engine died, want most to fail over", failed, total)
	}
}

// A router replica killed: Envoy keeps serving through the other.
func TestRouterReplicaKilled(t *testing.T) {
	s := startStack(t, stackOptions{routers: 2})
	failed, total := underLoad(s, 4*time.Second, func(w, i int) string { return fmt.Sprintf("w%d %d %s", w, i, systemPrompt) }, s.routers[0].killNow)
	t.Logf("router replica killed (SIGKILL) mid-run: %d of %d requests failed", failed, total)
	time.Sleep(1500 * time.Millisecond)
	for i := 0; i < 20; i++ {
		if r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("later %d", i), "hi", false, 4)); r.status != 200 {
			t.Fatalf("after the replica died: %v", r)
		}
	}
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
	failed, total := underLoad(s, 4*time.Second, func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%16, systemPrompt) }, func() {
		rd.p.killNow()
		time.Sleep(time.Second)
		rd.start()
	})
	t.Logf("Redis killed and restarted under traffic: %d of %d requests failed", failed, total)
	if failed != 0 {
		t.Errorf("%d requests failed while Redis restarted, want 0", failed)
	}
}
