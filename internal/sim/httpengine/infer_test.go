package httpengine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

func TestWholeResponses(t *testing.T) {
	_, url := start(t, fast())
	tests := []struct {
		name       string
		path, body string
		object     string
		wantText   string
		wantFinish string
		wantPrompt int
		wantCached int // the cases run in order on one engine
	}{
		{
			name: "chat", path: "/v1/chat/completions", body: chatBody("hello there", ""),
			object: "chat.completion", wantText: output(8), wantFinish: "stop",
			// <|user|>\n (9 bytes: 3 tokens) + 11 bytes (3) + <|assistant|>\n (14 bytes: 4)
			wantPrompt: 10,
		},
		{
			name: "chat max_tokens", path: "/v1/chat/completions", body: chatBody("hello there", `,"max_tokens":3`),
			object: "chat.completion", wantText: output(3), wantFinish: "length", wantPrompt: 10,
			wantCached: 9, // the same prompt again: all but its last token
		},
		{
			name: "chat ignore_eos", path: "/v1/chat/completions", body: chatBody("hello there", `,"max_tokens":12,"ignore_eos":true`),
			object: "chat.completion", wantText: output(12), wantFinish: "length", wantPrompt: 10, wantCached: 9,
		},
		{
			name: "completion", path: "/v1/completions", body: `{"model":"m","prompt":"abcdefgh"}`,
			object: "text_completion", wantText: output(8), wantFinish: "stop", wantPrompt: 2,
		},
		{
			name: "completion of several prompts uses the first", path: "/v1/completions", body: `{"model":"m","prompt":["abcd","efghijklmnop"],"max_tokens":1}`,
			object: "text_completion", wantText: "token0", wantFinish: "length", wantPrompt: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, "POST", url+tt.path, tt.body)
			if a.status != http.StatusOK {
				t.Fatalf("POST %s = %d %s, want 200", tt.path, a.status, a.body)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			m := decode(t, a.body)
			if m["object"] != tt.object || m["model"] != "m" {
				t.Errorf("object, model = %v, %v, want %s, m", m["object"], m["model"], tt.object)
			}
			if id, _ := m["id"].(string); id == "" {
				t.Errorf("id = %v, want a string", m["id"])
			}
			if _, ok := m["created"].(float64); !ok {
				t.Errorf("created = %v, want a number", m["created"])
			}
			choices, _ := m["choices"].([]any)
			if len(choices) != 1 {
				t.Fatalf("choices = %v, want one", m["choices"])
			}
			c := choices[0].(map[string]any)
			var text any
			if tt.object == "chat.completion" {
				msg, _ := c["message"].(map[string]any)
				if msg["role"] != "assistant" {
					t.Errorf("message.role = %v, want assistant", msg["role"])
				}
				text = msg["content"]
			} else {
				text = c["text"]
			}
			if text != tt.wantText {
				t.Errorf("text = %q, want %q", text, tt.wantText)
			}
			if c["finish_reason"] != tt.wantFinish {
				t.Errorf("finish_reason = %v, want %s", c["finish_reason"], tt.wantFinish)
			}
			u, _ := m["usage"].(map[string]any)
			n := float64(len(strings.Fields(tt.wantText)))
			if u["prompt_tokens"] != float64(tt.wantPrompt) || u["completion_tokens"] != n || u["total_tokens"] != float64(tt.wantPrompt)+n {
				t.Errorf("usage = %v, want prompt %d, completion %v, total the sum", u, tt.wantPrompt, n)
			}
			if d, _ := u["prompt_tokens_details"].(map[string]any); d["cached_tokens"] != float64(tt.wantCached) {
				t.Errorf("usage.prompt_tokens_details = %v, want cached_tokens %d", u["prompt_tokens_details"], tt.wantCached)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	_, url := start(t, fast())
	tests := []struct {
		name        string
		path        string
		contentType string
		body        string
		wantStatus  int
		wantParam   string
	}{
		{"not JSON", "/v1/chat/completions", "application/json", `{"model":`, 400, ""},
		{"empty", "/v1/completions", "application/json", ``, 400, ""},
		{"wrong content type", "/v1/chat/completions", "text/plain", chatBody("x", ""), 415, ""},
		{"no model", "/v1/chat/completions", "application/json", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
		{"no messages", "/v1/chat/completions", "application/json", `{"model":"m"}`, 400, "messages"},
		{"no prompt", "/v1/completions", "application/json", `{"model":"m"}`, 400, "prompt"},
		{"bad stream", "/v1/completions", "application/json", `{"model":"m","prompt":"x","stream":"yes"}`, 400, "stream"},
		{"bad include_usage", "/v1/completions", "application/json", `{"model":"m","prompt":"x","stream_options":{"include_usage":1}}`, 400, "stream_options.include_usage"},
		{"bad ignore_eos", "/v1/completions", "application/json", `{"model":"m","prompt":"x","ignore_eos":"no"}`, 400, "ignore_eos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tt.contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Error struct {
					Message, Type string
					Param, Code   *string
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("error body is not JSON: %v", err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (%+v)", resp.StatusCode, tt.wantStatus, got.Error)
			}
			if got.Error.Type != openai.TypeInvalidRequest || got.Error.Message == "" {
				t.Errorf("error = %+v, want type %s and a message", got.Error, openai.TypeInvalidRequest)
			}
			if param := deref(got.Error.Param); param != tt.wantParam {
				t.Errorf("error param = %q, want %q", param, tt.wantParam)
			}
		})
	}
}

// The parser's errors go back byte for byte.
func TestParserErrorVerbatim(t *testing.T) {
	_, url := start(t, fast())
	body := `{"model":"m","messages":[]}`
	_, perr := openai.Parse("POST", "/v1/chat/completions", "application/json", []byte(body), openai.Limits{})
	oe, ok := openai.AsError(perr)
	if !ok {
		t.Fatalf("Parse() error = %v, want an *openai.Error", perr)
	}
	a := do(t, "POST", url+"/v1/chat/completions", body)
	if a.status != oe.Status || !bytes.Equal(bytes.TrimSpace(a.body), oe.JSON()) {
		t.Errorf("POST = %d %s, want %d %s", a.status, a.body, oe.Status, oe.JSON())
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestCachedTokens(t *testing.T) {
	_, url := start(t, fast())
	system := strings.Repeat("You are a careful assistant. ", 150) // 4,350 bytes
	chat := func(question string) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 2, "messages": []map[string]string{
			{"role": "system", "content": system}, {"role": "user", "content": question},
		}})
		return string(b)
	}
	cached := func(body string) (prompt, cached int) {
		a := do(t, "POST", url+"/v1/chat/completions", body)
		if a.status != http.StatusOK {
			t.Fatalf("POST = %d %s, want 200", a.status, a.body)
		}
		var got struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal(a.body, &got); err != nil {
			t.Fatal(err)
		}
		return got.Usage.PromptTokens, got.Usage.PromptTokensDetails.CachedTokens
	}
	first, second := chat("What is a prefix cache?"), chat("And what is a KV cache?")
	if _, c := cached(first); c != 0 {
		t.Errorf("first request cached_tokens = %d, want 0", c)
	}
	// The hit is the shared leading blocks of the two prompts, computed as
	// the router computes them.
	pr, err := tokenize.NewPrompter(tokenize.Bytes(), tokenize.Config{BlockSize: DefaultBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	var a, b tokenize.Prompt
	msgs := func(q string) []tokenize.Message {
		return []tokenize.Message{{Role: "system", Content: system}, {Role: "user", Content: q}}
	}
	if err := pr.Messages(msgs("What is a prefix cache?"), &a); err != nil {
		t.Fatal(err)
	}
	if err := pr.Messages(msgs("And what is a KV cache?"), &b); err != nil {
		t.Fatal(err)
	}
	shared := 0
	for shared < min(len(a.Blocks), len(b.Blocks)) && a.Blocks[shared] == b.Blocks[shared] {
		shared++
	}
	want := min(shared*DefaultBlockSize, b.Tokens-1)
	p, c := cached(second)
	if p != b.Tokens {
		t.Errorf("second request prompt_tokens = %d, want %d", p, b.Tokens)
	}
	if c != want || c < 1000 {
		t.Errorf("second request cached_tokens = %d, want %d (> 1000)", c, want)
	}
	if _, c := cached(second); c != b.Tokens-1 {
		t.Errorf("repeated request cached_tokens = %d, want %d (all but one token)", c, b.Tokens-1)
	}
}

// timeToHeaders sends a streaming request and returns how long its
// response headers took, which the server holds back until the first token.
func timeToHeaders(t *testing.T, url, body string) time.Duration {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	begin := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	defer resp.Body.Close()
	readEvents(t, resp.Body)
	return took
}

func TestTTFTOrdering(t *testing.T) {
	opt := fast()
	opt.TimeScale = 20
	s, url := start(t, opt)
	small := chatBody("a short question", `,"stream":true,"max_tokens":2`)
	idle := timeToHeaders(t, url, small)

	// 60,000 bytes: 15,000 tokens, about 2.4 s of prefill (120 ms wall).
	big := chatBody(strings.Repeat("x", 60000), `,"max_tokens":1`)
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(big))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		resp.Body.Close()
		done <- answer{status: resp.StatusCode}
	}()
	waitFor(t, "the big prompt to be admitted", func() bool { return s.Snapshot().Running == 1 })
	loaded := timeToHeaders(t, url, chatBody("another short question", `,"stream":true,"max_tokens":2`))
	if a := <-done; a.status != http.StatusOK {
		t.Fatalf("big request status = %d, want 200", a.status)
	}
	if loaded <= idle || loaded < 40*time.Millisecond {
		t.Errorf("time to first token: loaded %v, idle %v; want loaded later, and >= 40ms", loaded, idle)
	}
}

// TestOutputCappedAtMaxModelLen: with the realistic model a request stops
// at max_model_len tokens, prompt and output, with finish_reason "length".
func TestOutputCappedAtMaxModelLen(t *testing.T) {
	opt := fast()
	p, err := engine.LoadProfile(DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	p.MaxModelLen = 64
	opt.Profile, opt.OutputTokens = p, 100
	_, url := start(t, opt)
	a := do(t, "POST", url+"/v1/chat/completions", chatBody(strings.Repeat("word ", 30), ""))
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	m := decode(t, a.body)
	c := m["choices"].([]any)[0].(map[string]any)
	u := m["usage"].(map[string]any)
	prompt, out := u["prompt_tokens"].(float64), u["completion_tokens"].(float64)
	if c["finish_reason"] != "length" || prompt+out != 64 {
		t.Errorf("finish_reason %v, %v prompt + %v output tokens; want length and 64 in all", c["finish_reason"], prompt, out)
	}
}
