//go:build tokenizers

package extproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/chattmpl"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// With Llama 3's tokenizer and its own chat template (its
// tokenizer_config.json), the cached prefix the router expects on a second
// turn is exactly the whole blocks the two turns' real token ids share:
// the tokens the engine itself computes.
func TestRealChatTemplatePool(t *testing.T) {
	file := llamaTokenizerFile(t)
	cfgFile := filepath.Join(filepath.Dir(file), "meta-llama-3-8b-instruct", "tokenizer_config.json")
	ts := start(t, parseConfig(t, `
pools:
  - tokenizer: `+file+`
    chat_template: `+cfgFile+`
    instances: [{address: 10.0.0.1:8000}, {address: 10.0.0.2:8000}, {address: 10.0.0.3:8000}, {address: 10.0.0.4:8000}]
routing: {debug_headers: true}
`), false)
	// The engine's side, computed here independently of the router's pieces:
	// render each turn whole and encode it whole.
	src, err := chattmpl.Resolve(cfgFile, file)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tokenize.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	engine := func(msgs []chattmpl.Message) []uint32 {
		text, err := src.Template.Render(&chattmpl.Chat{Messages: msgs, AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		return enc.Encode(text, nil)
	}
	system := strings.Repeat("You are a helpful assistant for travellers in Europe. ", 90)
	turn1 := []chattmpl.Message{{Role: "system", Content: system}, {Role: "user", Content: "What is the capital of France?"}}
	turn2 := append(slices.Clone(turn1), chattmpl.Message{Role: "assistant", Content: "Paris."}, chattmpl.Message{Role: "user", Content: "And of Spain?"})
	b1, b2 := tokenize.Blocks(engine(turn1), 16, nil), tokenize.Blocks(engine(turn2), 16, nil)
	shared := 0
	for shared < len(b1) && b1[shared] == b2[shared] {
		shared++
	}

	body := func(msgs []chattmpl.Message) string {
		var parts []string
		for _, m := range msgs {
			parts = append(parts, `{"role":"`+m.Role+`","content":"`+m.Content+`"}`)
		}
		return `{"model":"llama","messages":[` + strings.Join(parts, ",") + `]}`
	}
	// The router's tokens for each turn are the engine's.
	for i, msgs := range [][]chattmpl.Message{turn1, turn2} {
		req, err := openai.Parse("POST", "/v1/chat/completions", "application/json", []byte(body(msgs)), openai.Limits{MaxBodyBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ts.srv.pools.Pools()[0].Tokenize(req, pool.Controls{})
		want := engine(msgs)
		if err != nil || r.Tokens != len(want) || !slices.Equal(r.Blocks, tokenize.Blocks(want, 16, nil)) {
			t.Errorf("turn %d: the router has %d tokens (%v), the engine %d", i+1, r.Tokens, err, len(want))
		}
	}
	first := ts.open(t)
	ts.post(t, first, "/v1/chat/completions", body(turn1))
	first.responseHeaders(t, "200")
	first.close()
	second := ts.open(t)
	defer second.close()
	ts.post(t, second, "/v1/chat/completions", body(turn2))
	rr := second.responseHeaders(t, "200")
	got := setHeader(rr.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-dualmap-cached-tokens")
	if want := strconv.Itoa(shared * 16); got != want {
		t.Errorf("x-dualmap-cached-tokens = %q, want %s (the %d whole blocks the two turns' real tokens share)", got, want, shared)
	}
}

// llamaTokenizerFile is the Llama 3 tokenizer.json of the tokenizers
// module's test data.
func llamaTokenizerFile(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("go env GOMODCACHE:", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "github.com/daulet/tokenizers@v1.22.1/test/data/Meta-Llama-3-8B-Instruct.json")
	if _, err := os.Stat(file); err != nil {
		t.Skip("tokenizer file not in the module cache:", err)
	}
	return file
}
