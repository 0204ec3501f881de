package httpengine

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/tokenize"
)

// pdAnswer is what the P/D tests read of an answer.
type pdAnswer struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
	}
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	KV json.RawMessage `json:"kv_transfer_params"`
}

func postPD(t *testing.T, url, body string) (int, pdAnswer, []byte) {
	t.Helper()
	a := do(t, "POST", url+"/v1/chat/completions", body)
	var got pdAnswer
	if a.status == http.StatusOK {
		if err := json.Unmarshal(a.body, &got); err != nil {
			t.Fatalf("body %q: %v", a.body, err)
		}
	}
	return a.status, got, a.body
}

// promptOf is the router's view of a one-message chat: its block hashes.
func promptOf(t *testing.T, content string) tokenize.Prompt {
	t.Helper()
	pr, err := tokenize.NewPrompter(tokenize.Bytes(), tokenize.Config{BlockSize: DefaultBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	var p tokenize.Prompt
	if err := pr.Messages([]tokenize.Message{{Role: "user", Content: content}}, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The two legs of a disaggregated request, as llm-d's sidecar sends them:
// the prefill instance answers the KV it holds, and a decode instance
// given those parameters counts the prompt as cached (it prefills only the
// last token) and says how much it received.
func TestPrefillDecodeLegs(t *testing.T) {
	preOpt, decOpt := fast(), fast()
	preOpt.Name, decOpt.Name = "127.0.0.1:9", "decode"
	pre, preURL := start(t, preOpt)
	dec, decURL := start(t, decOpt)
	content := strings.Repeat("A long prompt to prefill elsewhere. ", 60)
	want := promptOf(t, content)

	// The prefill leg: the sidecar's body (nulls included), one token.
	prefillKV := `,"max_tokens":1,"stream":false,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`
	status, got, raw := postPD(t, preURL, chatBody(content, prefillKV))
	if status != http.StatusOK {
		t.Fatalf("prefill leg: %d %s", status, raw)
	}
	var kv kvAnswer
	if err := json.Unmarshal(got.KV, &kv); err != nil {
		t.Fatalf("prefill leg's kv_transfer_params %s: %v", got.KV, err)
	}
	if !kv.DoRemotePrefill || kv.DoRemoteDecode || kv.RemoteEngineID != "127.0.0.1:9" || kv.RemoteHost != "127.0.0.1" || kv.RemotePort != 9 {
		t.Errorf("prefill leg's kv_transfer_params = %+v, want do_remote_prefill from 127.0.0.1:9", kv)
	}
	if len(kv.RemoteBlockIDs) != len(want.Blocks) || kv.RemoteBlockIDs[0] != blockID(want.Blocks[0]) {
		t.Errorf("remote_block_ids = %v, want the %d block hashes of the prompt", kv.RemoteBlockIDs, len(want.Blocks))
	}
	if got.Usage.CompletionTokens != 1 {
		t.Errorf("prefill leg generated %d tokens, want 1", got.Usage.CompletionTokens)
	}
	if n := pre.prefillLegs.Load(); n != 1 {
		t.Errorf("prefill legs counted %d, want 1", n)
	}

	// The decode leg with those parameters, and then a cold control.
	decodeKV := `,"max_tokens":4,"kv_transfer_params":` + string(got.KV)
	status, got, raw = postPD(t, decURL, chatBody(content, decodeKV))
	if status != http.StatusOK {
		t.Fatalf("decode leg: %d %s", status, raw)
	}
	if len(got.KV) != 0 {
		t.Errorf("decode leg answered kv_transfer_params %s, want none", got.KV)
	}
	if c := got.Usage.PromptTokensDetails.CachedTokens; c != want.Tokens-1 {
		t.Errorf("decode leg cached_tokens = %d, want %d (the received prompt but its last token)", c, want.Tokens-1)
	}
	if n, w := dec.kvReceived.Load(), int64(min(len(want.Blocks)*DefaultBlockSize, want.Tokens)); n != w {
		t.Errorf("decode engine received %d tokens, want %d", n, w)
	}
	if m := do(t, "GET", decURL+"/metrics", ""); !strings.Contains(string(m.body), "dualmap_engine_kv_received_tokens_total{") {
		t.Errorf("/metrics lacks dualmap_engine_kv_received_tokens_total")
	}
	other := strings.Repeat("Another prompt, never prefilled. ", 60)
	if _, got, _ := postPD(t, decURL, chatBody(other, `,"max_tokens":4`)); got.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("a cold prompt on the decode engine: cached_tokens %d, want 0", got.Usage.PromptTokensDetails.CachedTokens)
	}
}

// KV a decode leg cannot use is recomputed: block IDs that are not this
// prompt's (another engine's kind, or another prompt's), or none.
func TestDecodeLegMismatchedKV(t *testing.T) {
	s, url := start(t, fast())
	other := promptOf(t, "something else entirely")
	for i, kv := range []string{
		`{"do_remote_prefill":true,"remote_block_ids":["DUMMY_ID"]}`,
		`{"do_remote_prefill":true,"remote_block_ids":[1,2,3]}`,
		`{"do_remote_prefill":true,"remote_block_ids":["` + blockID(other.Blocks[0]) + `"]}`,
		`{"do_remote_prefill":true}`,
		`null`,
	} {
		content := strings.Repeat("Mismatch prompt number "+string(rune('a'+i))+". ", 40)
		status, got, raw := postPD(t, url, chatBody(content, `,"max_tokens":2,"kv_transfer_params":`+kv))
		if status != http.StatusOK {
			t.Fatalf("kv %s: %d %s", kv, status, raw)
		}
		if c := got.Usage.PromptTokensDetails.CachedTokens; c != 0 {
			t.Errorf("kv %s: cached_tokens %d, want 0 (nothing of this prompt received)", kv, c)
		}
	}
	if n := s.kvReceived.Load(); n != 0 {
		t.Errorf("received %d tokens from unusable parameters, want 0", n)
	}
}

// What no KV connector takes is a 400 naming the field.
func TestPDBadRequests(t *testing.T) {
	_, url := start(t, fast())
	for _, tt := range []struct{ name, extra, param string }{
		{"streamed prefill leg", `,"stream":true,"kv_transfer_params":{"do_remote_decode":true}`, "stream"},
		{"both legs", `,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":true}`, "kv_transfer_params"},
		{"not an object", `,"kv_transfer_params":7`, "kv_transfer_params"},
		{"wrong field type", `,"kv_transfer_params":{"do_remote_decode":"yes"}`, "kv_transfer_params.do_remote_decode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, "POST", url+"/v1/chat/completions", chatBody("hi", tt.extra))
			if a.status != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", a.status, a.body)
			}
			var e struct {
				Error struct{ Param string }
			}
			if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Param != tt.param {
				t.Errorf("body %s: want an OpenAI error with param %q", a.body, tt.param)
			}
		})
	}
}

// Any kv_transfer_params: an answer or a 400, never a 5xx or a panic; a
// decode leg never receives more than its prompt.
func FuzzKVTransferParams(f *testing.F) {
	f.Add(`{"do_remote_decode":true}`, false)
	f.Add(`{"do_remote_prefill":true,"remote_block_ids":["0",1,null,{"a":[]}]}`, false)
	f.Add(`{"do_remote_decode":true}`, true)
	f.Add(`[]`, false)
	opt := fast()
	opt.TimeScale, opt.OutputTokens = 1e6, 1
	s, url := start(f, opt)
	f.Fuzz(func(t *testing.T, kv string, stream bool) {
		if !json.Valid([]byte(kv)) {
			return // not a JSON body: the parser's own fuzz target
		}
		before := s.kvReceived.Load()
		extra := `,"kv_transfer_params":` + kv
		if stream {
			extra += `,"stream":true`
		}
		content := strings.Repeat("fuzzed prompt ", 20)
		a := do(t, "POST", url+"/v1/chat/completions", chatBody(content, extra))
		if a.status != http.StatusOK && a.status != http.StatusBadRequest {
			t.Fatalf("kv_transfer_params %s: %d %s, want 200 or 400", kv, a.status, a.body)
		}
		if n := s.kvReceived.Load() - before; n > int64(promptOf(t, content).Tokens) {
			t.Errorf("received %d tokens for a prompt of %d", n, promptOf(t, content).Tokens)
		}
	})
}
