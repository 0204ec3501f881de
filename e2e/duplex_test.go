//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// fullDuplex turns envoy/front-proxy.yaml's ext_proc filter into the
// Gateway API Inference Extension's mode: full-duplex streamed bodies both
// ways, trailers sent.
func fullDuplex(cfg string) string {
	for old, new := range map[string]string{
		"request_body_mode: BUFFERED":  "request_body_mode: FULL_DUPLEX_STREAMED",
		"response_body_mode: STREAMED": "response_body_mode: FULL_DUPLEX_STREAMED",
		"request_trailer_mode: SKIP":   "request_trailer_mode: SEND",
		"response_trailer_mode: SKIP":  "response_trailer_mode: SEND",
	} {
		if !strings.Contains(cfg, old) {
			panic("front-proxy.yaml has no " + old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	return cfg
}

// The router behind a real Envoy in full-duplex mode: prompts are pinned
// with affinity, streaming and plain answers come back whole, a large body
// reaches the engine intact (it parses it), and bad input is refused by
// the router before it goes upstream.
func TestFullDuplexThroughEnvoy(t *testing.T) {
	s := startStack(t, stackOptions{renderEnvoy: fullDuplex, maxBodyBytes: 4 << 20})
	first := s.post("/v1/chat/completions", chatBody(systemPrompt, "hello", true, 16))
	if first.status != 200 || first.err != nil || !first.done || first.instance == "" || first.engine != first.instance {
		t.Fatalf("streaming: %+v", first)
	}
	again := s.post("/v1/chat/completions", chatBody(systemPrompt, "hello again", true, 16))
	if again.status != 200 || again.instance != first.instance {
		t.Errorf("same system prompt went to %s, then %s: want affinity", first.instance, again.instance)
	}
	plain := s.post("/v1/chat/completions", chatBody(systemPrompt, "no stream", false, 8))
	if plain.status != 200 || !strings.Contains(string(plain.body), `"choices"`) {
		t.Fatalf("non-streaming: %+v", plain)
	}
	big := s.post("/v1/chat/completions", chatBody(strings.Repeat("A large prompt, echoed through Envoy in chunks. ", 20000), "sum it up", false, 4))
	if big.status != 200 || !strings.Contains(string(big.body), `"choices"`) {
		t.Fatalf("1 MB body: %+v", big)
	}
	bad := s.post("/v1/chat/completions", []byte(`{"model":`))
	if bad.status != 400 {
		t.Fatalf("bad JSON: %+v, want 400", bad)
	}
}
