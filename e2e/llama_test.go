//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The stack with real engines: llama.cpp's llama-server (built by
// scripts/llama.sh with a tiny random-weight model; `make e2e` passes its
// paths in DUALMAP_LLAMA_SERVER and DUALMAP_LLAMA_MODEL). Sized for a
// 2-core machine: two instances, one thread each, two slots of 4096 tokens
// each, no host-RAM prompt cache (--cache-ram 0: an instance reuses a
// prefix only while a slot holds it).
const (
	llamaSlots   = 2
	llamaSlotCtx = 4096
)

func llamaPaths(t *testing.T) (bin, model string) {
	t.Helper()
	bin, model = os.Getenv("DUALMAP_LLAMA_SERVER"), os.Getenv("DUALMAP_LLAMA_MODEL")
	if bin == "" || model == "" {
		t.Skip("DUALMAP_LLAMA_SERVER / DUALMAP_LLAMA_MODEL not set: run `make e2e` (scripts/llama.sh builds llama-server and the model)")
	}
	return bin, model
}

func startLlamaStack(t *testing.T) *stack {
	bin, model := llamaPaths(t)
	return startStack(t, stackOptions{
		engines: 2,
		engineArgs: func(_, port int) []string {
			return []string{bin, "--model", model, "--alias", "dualmap-tiny", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
				"--threads", "1", "--threads-batch", "1", "--parallel", strconv.Itoa(llamaSlots),
				"--ctx-size", strconv.Itoa(llamaSlots * llamaSlotCtx), "--cache-ram", "0", "--metrics"}
		},
		poolConfig:  "    metrics: {enabled: true, interval: 200ms}\n",
		extraConfig: fmt.Sprintf("limits: {max_running: %d}\n", llamaSlots),
	})
}

// llamaReply is what a client saw from a llama-server through the stack.
type llamaReply struct {
	status         int
	body           []byte
	instance       string // x-dualmap-instance
	reason         string // x-dualmap-reason
	prompt, cached int    // usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
	chunks         int    // streaming: data events with content
	done           bool   // streaming: [DONE] seen
	cacheN         int    // streaming: timings.cache_n of the last chunk
	err            error
	elapsed        time.Duration
}

func (r llamaReply) String() string {
	return fmt.Sprintf("status %d err %v instance %s prompt %d cached %d body %.300s", r.status, r.err, r.instance, r.prompt, r.cached, r.body)
}

func llamaChat(system, user string, stream bool, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "dualmap-tiny", "stream": stream, "max_tokens": maxTokens, "ignore_eos": true,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
	})
	return b
}

type llamaUsage struct {
	Usage struct {
		Prompt  int `json:"prompt_tokens"`
		Details struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings struct {
		CacheN int `json:"cache_n"`
	} `json:"timings"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

func (s *stack) llamaPost(body []byte, hdr ...string) llamaReply {
	start := time.Now()
	resp, err := client.Do(s.newPost("/v1/chat/completions", body, hdr))
	if err != nil {
		return llamaReply{err: err}
	}
	defer resp.Body.Close()
	r := llamaReply{status: resp.StatusCode, instance: resp.Header.Get("x-dualmap-instance"), reason: resp.Header.Get("x-dualmap-reason")}
	if strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				r.done = true
				continue
			}
			var u llamaUsage
			if json.Unmarshal([]byte(data), &u) == nil {
				if len(u.Choices) > 0 && u.Choices[0].Delta.Content != "" {
					r.chunks++
				}
				if u.Timings.CacheN > 0 {
					r.cacheN = u.Timings.CacheN
				}
			}
		}
		r.err = sc.Err()
		r.elapsed = time.Since(start)
		return r
	}
	r.body, r.err = io.ReadAll(resp.Body)
	r.elapsed = time.Since(start)
	var u llamaUsage
	if json.Unmarshal(r.body, &u) == nil {
		r.prompt, r.cached = u.Usage.Prompt, u.Usage.Details.Cached
	}
	return r
}

// routerMetric sums a router series over the label sets matching labels
// (a substring of the label block, "" for all).
func (s *stack) routerMetric(t *testing.T, name, labels string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + s.routers[0].admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if !strings.Contains(m[1], labels) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

var llamaSystem = strings.Repeat("You are a meticulous assistant for a logistics company; answer briefly. ", 50)

func TestLlamaServer(t *testing.T) {
	s := startLlamaStack(t)

	// Prefix affinity: requests sharing a long system prompt stay on the
	// instance that holds it, and the engine reports most of the prompt as
	// served from its cache.
	t.Run("prefix affinity shows as engine-reported cached tokens", func(t *testing.T) {
		first := s.llamaPost(llamaChat(llamaSystem, "Where is order 1?", false, 4))
		if first.status != 200 || first.instance == "" || first.prompt < 500 {
			t.Fatalf("first request: %v", first)
		}
		t.Logf("first: %d prompt tokens, %d cached, on %s", first.prompt, first.cached, first.instance)
		for i := 2; i <= 6; i++ {
			r := s.llamaPost(llamaChat(llamaSystem, fmt.Sprintf("Where is order %d?", i), false, 4))
			if r.status != 200 {
				t.Fatalf("request %d: %v", i, r)
			}
			if r.instance != first.instance {
				t.Errorf("request %d went to %s, want %s (same prefix)", i, r.instance, first.instance)
			}
			if r.cached*10 < r.prompt*8 {
				t.Errorf("request %d: the engine reported %d of %d prompt tokens cached, want >= 80%% (the shared system prompt)", i, r.cached, r.prompt)
			}
			t.Logf("request %d: %d prompt tokens, %d cached (engine), %v", i, r.prompt, r.cached, r.elapsed.Round(time.Millisecond))
		}
		// The router read the same figures from the responses.
		inst := `instance="` + first.instance + `"`
		var reported float64
		// The counter is updated as each response ends: wait (bounded) for
		// all five rather than the first.
		waitLoad(func() bool {
			reported = s.routerMetric(t, "dualmap_engine_cached_tokens_total", inst)
			return reported >= 5*500
		})
		predicted := s.routerMetric(t, "dualmap_predicted_cached_tokens_total", inst)
		t.Logf("router: engine-reported cached tokens on %s %v, predicted %v", first.instance, reported, predicted)
		if reported < 5*500 {
			t.Errorf("dualmap_engine_cached_tokens_total for %s = %v, want the five cached prompts", first.instance, reported)
		}
		if predicted == 0 {
			t.Errorf("dualmap_predicted_cached_tokens_total for %s = 0: the router predicted no reuse", first.instance)
		}
	})

	t.Run("streaming and non-streaming through Envoy", func(t *testing.T) {
		r := s.llamaPost(llamaChat(llamaSystem, "stream please", true, 16))
		if r.status != 200 || r.err != nil || !r.done || r.chunks == 0 {
			t.Fatalf("streaming: %v, %d content chunks, done %v", r, r.chunks, r.done)
		}
		t.Logf("streaming: %d content chunks, timings.cache_n %d", r.chunks, r.cacheN)
		n := s.llamaPost(llamaChat(llamaSystem, "no stream", false, 8))
		if n.status != 200 || !bytes.Contains(n.body, []byte(`"choices"`)) || n.prompt == 0 {
			t.Fatalf("non-streaming: %v", n)
		}
	})

	// The engine's own error (a prompt over a slot's context) reaches the
	// client as the engine wrote it, and does not count against the
	// instance's health.
	t.Run("engine errors pass through", func(t *testing.T) {
		before := s.routerMetric(t, "dualmap_upstream_errors_total", "")
		r := s.llamaPost(llamaChat(strings.Repeat(llamaSystem, 8), "too long", false, 4))
		if r.status != 400 || !bytes.Contains(r.body, []byte(`"error"`)) || !bytes.Contains(r.body, []byte("context")) {
			t.Fatalf("over-long prompt: %v; want the engine's 400 with its OpenAI-style error", r)
		}
		t.Logf("engine's answer passed through: %d %s", r.status, r.body)
		if after := s.routerMetric(t, "dualmap_upstream_errors_total", ""); after != before {
			t.Errorf("dualmap_upstream_errors_total went from %v to %v after a client's bad request", before, after)
		}
		if ok := s.llamaPost(llamaChat(llamaSystem, "still there?", false, 4)); ok.status != 200 {
			t.Errorf("after the 400: %v", ok)
		}
	})

	// Identical prompts sent at once: the instance holding their prefix
	// keeps them while its estimated TTFT stays within the policy's
	// headroom (2 x the SLO), then the other candidate takes them, if it
	// meets the SLO (scheduler/policy_dualmap.go). Eight copies of 48 tokens
	// keep two slots busy for about a second here: within the route's 5 s
	// SLO they stay together; with a client's 500 ms SLO the later ones
	// move, and the copies that moved say "load".
	t.Run("identical prompts stay together within the SLO and spread past it", func(t *testing.T) {
		burst := func(hot string, hdr ...string) map[string]int {
			if r := s.llamaPost(llamaChat(hot, "same question", false, 4)); r.status != 200 {
				t.Fatalf("warm-up: %v", r)
			}
			const n = 8
			var wg sync.WaitGroup
			replies := make([]llamaReply, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					replies[i] = s.llamaPost(llamaChat(hot, "same question", false, 48), hdr...)
				}()
				time.Sleep(20 * time.Millisecond)
			}
			wg.Wait()
			used := map[string]int{}
			for i, r := range replies {
				if r.status != 200 {
					t.Fatalf("copy %d: %v", i, r)
				}
				used[r.instance]++
				used["reason "+r.reason]++
				t.Logf("copy %d: %s (%s) in %v", i, r.instance, r.reason, r.elapsed.Round(time.Millisecond))
			}
			return used
		}
		together := burst("Hot prompt one. " + llamaSystem)
		t.Logf("within the route's 5 s SLO: %v", together)
		if together["reason load"] > 0 {
			t.Errorf("with the 5 s SLO %d copies left the instance holding their prefix (%v); want them kept there", together["reason load"], together)
		}
		spread := burst("Hot prompt two. "+llamaSystem, "x-dualmap-slo", "500ms")
		t.Logf("with a 500 ms SLO: %v", spread)
		if spread["reason load"] == 0 {
			t.Errorf("with a 500 ms SLO no copy moved off the busy instance (%v); want the later ones on the other candidate", spread)
		}
	})

	// The official OpenAI Python SDK against the real engines: streaming,
	// non-streaming, reuse reported in usage, the engine's error as an SDK
	// exception with its status.
	t.Run("OpenAI Python SDK", func(t *testing.T) {
		python := filepath.Join(filepath.Dir(envoyBin), "python")
		if _, err := os.Stat(python); err != nil {
			t.Fatalf("no python beside envoy (%s): scripts/envoy.sh installs the SDK there", python)
		}
		script := `
import sys, openai
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
system = sys.argv[2]
msgs = [{"role": "system", "content": system}, {"role": "user", "content": "hello"}]
r = c.chat.completions.create(model="dualmap-tiny", messages=msgs, max_tokens=8, extra_body={"ignore_eos": True})
r = c.chat.completions.create(model="dualmap-tiny", messages=msgs, max_tokens=8, extra_body={"ignore_eos": True})
assert r.choices[0].message.content is not None, r
cached = r.usage.prompt_tokens_details.cached_tokens
assert cached > r.usage.prompt_tokens // 2, r.usage
print("non-streaming ok: prompt", r.usage.prompt_tokens, "cached", cached)
n = 0
for ch in c.chat.completions.create(model="dualmap-tiny", messages=msgs, max_tokens=8, stream=True, extra_body={"ignore_eos": True}):
    if ch.choices and ch.choices[0].delta.content:
        n += 1
assert n > 0
print("streaming ok", n)
try:
    c.chat.completions.create(model="dualmap-tiny", messages=[{"role": "user", "content": system * 8}], max_tokens=4)
    raise SystemExit("an over-long prompt was accepted")
except openai.BadRequestError as e:
    print("engine error ok:", e.status_code, e.message[:120])
`
		out, err := exec.Command(python, "-c", script, s.url, llamaSystem).CombinedOutput()
		if err != nil {
			t.Fatalf("openai SDK: %v\n%s", err, out)
		}
		t.Logf("%s", out)
	})
}

// A llama-server killed (SIGKILL) mid-run: the requests it was serving fail,
// at most one per client, no later request fails, and once the router has
// noticed it no longer chooses it.
func TestLlamaServerKilled(t *testing.T) {
	s := startLlamaStack(t)
	prompt := func(w, i int) string { return fmt.Sprintf("w%d p%d %s", w, i%4, llamaSystem) }
	victim := killBusiest(t, s, prompt, 3*time.Second)
	samples, faultAt := victim.samples, victim.faultAt
	failed := checkFailures(t, samples, faultAt)
	t.Logf("llama-server %s killed mid-run, after it served %d requests: %d of %d requests failed; decisions of those served: %v", victim.addr, victim.served, failed, len(samples), servedBy(samples))
	waitUnhealthy(t, s, victim.addr)
	for i := 0; i < 6; i++ {
		r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("after %d %s", i, llamaSystem), "hi", false, 4))
		if r.failed() || r.instance == victim.addr {
			t.Fatalf("after the kill: %v", r)
		}
	}
}
