//go:build tokenizers

package extproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// With a real tokenizer file (the Llama 3 tokenizer the tokenizers module
// ships), multi-turn chats keep their affinity and the router expects the
// cached prefix on the second turn.
func TestRealTokenizerPool(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("go env GOMODCACHE:", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "github.com/daulet/tokenizers@v1.22.1/test/data/Meta-Llama-3-8B-Instruct.json")
	if _, err := os.Stat(file); err != nil {
		t.Skip("tokenizer file not in the module cache:", err)
	}
	ts := start(t, parseConfig(t, `
pools:
  - tokenizer: `+file+`
    instances: [{address: 10.0.0.1:8000}, {address: 10.0.0.2:8000}, {address: 10.0.0.3:8000}, {address: 10.0.0.4:8000}]
routing: {debug_headers: true}
`), false)
	// A system prompt of about 1,000 tokens: the key (whole 512-token key
	// blocks) covers it, so both turns share a key.
	long := func(user string) string {
		return strings.Replace(chat("llama", user, false), strings.Repeat("You are a helpful assistant. ", 40),
			strings.Repeat("You are a helpful assistant for travellers in Europe. ", 90), 1)
	}
	first := ts.open(t)
	r1 := ts.post(t, first, "/v1/chat/completions", long("What is the capital of France?"))
	dest := setHeader(r1.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
	first.responseHeaders(t, "200")
	first.close()
	if dest == "" {
		t.Fatalf("no destination: %v", r1)
	}
	second := ts.open(t)
	defer second.close()
	r2 := ts.post(t, second, "/v1/chat/completions", long("What is the capital of France? And of Spain?"))
	dest2 := setHeader(r2.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
	if strings.Split(dest2, ",")[0] != strings.Split(dest, ",")[0] {
		t.Errorf("second turn to %s, want %s", dest2, dest)
	}
	rr := second.responseHeaders(t, "200")
	if c := setHeader(rr.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-dualmap-cached-tokens"); c == "" || c == "0" {
		t.Errorf("x-dualmap-cached-tokens = %q, want the shared system prompt cached", c)
	}
}
