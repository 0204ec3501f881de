package pdsidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/httpengine"
)

// recorder is a fake upstream that keeps what it was sent and answers
// with answer.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
	heads  []http.Header
	paths  []string
	answer http.HandlerFunc
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	rc.mu.Lock()
	rc.bodies, rc.heads, rc.paths = append(rc.bodies, m), append(rc.heads, r.Header.Clone()), append(rc.paths, r.URL.Path)
	rc.mu.Unlock()
	rc.answer(w, r)
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

func jsonAnswer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// upstream serves h on loopback and returns its host:port.
func upstream(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// sidecar serves a Server in front of decode and returns its base URL.
func sidecar(t *testing.T, decode string) string {
	t.Helper()
	s, err := New(Options{Decode: decode, MaxBodyBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL
}

func post(t *testing.T, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const clientBody = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":7,"temperature":0.5}`

// Without the header every request goes to the engine as it came; the
// header is never passed on.
func TestStraightThrough(t *testing.T) {
	dec := &recorder{answer: jsonAnswer(200, `{"ok":true}`)}
	url := sidecar(t, upstream(t, dec))
	resp, b := post(t, url+"/v1/chat/completions", clientBody)
	if resp.StatusCode != 200 || string(b) != `{"ok":true}` {
		t.Fatalf("answer %d %s, want the engine's", resp.StatusCode, b)
	}
	if got := dec.bodies[0]; got["max_tokens"] != 7.0 || got["stream"] != true || got["kv_transfer_params"] != nil {
		t.Errorf("engine got %v, want the client's body unchanged", got)
	}
	// Another path with the header: straight through, without it.
	post(t, url+"/v1/embeddings", `{}`, DefaultHeader, "127.0.0.1:1")
	if dec.count() != 2 || dec.paths[1] != "/v1/embeddings" || dec.heads[1].Get(DefaultHeader) != "" {
		t.Errorf("second request: paths %v, header %q; want /v1/embeddings without %s", dec.paths, dec.heads[1].Get(DefaultHeader), DefaultHeader)
	}
}

// The two legs' bodies and headers, as llm-d's sidecar sends them.
func TestTwoLegs(t *testing.T) {
	pre := &recorder{answer: jsonAnswer(200, `{"choices":[],"kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":["b1"],"remote_engine_id":"p"}}`)}
	dec := &recorder{answer: jsonAnswer(200, `{"choices":[{"text":"x"}]}`)}
	preAddr := upstream(t, pre)
	url := sidecar(t, upstream(t, dec))
	resp, b := post(t, url+"/v1/chat/completions", clientBody, DefaultHeader, preAddr+", 127.0.0.1:1")
	if resp.StatusCode != 200 || string(b) != `{"choices":[{"text":"x"}]}` {
		t.Fatalf("answer %d %s, want the decode engine's", resp.StatusCode, b)
	}
	if pre.count() != 1 || dec.count() != 1 {
		t.Fatalf("prefill got %d, decode %d requests, want 1 each (the first of the header's list)", pre.count(), dec.count())
	}
	p, d := pre.bodies[0], dec.bodies[0]
	kv, _ := p["kv_transfer_params"].(map[string]any)
	if kv["do_remote_decode"] != true || kv["do_remote_prefill"] != false || p["stream"] != false || p["stream_options"] != nil ||
		p["max_tokens"] != 1.0 || p["max_completion_tokens"] != 1.0 || p["min_tokens"] != 1.0 || p["temperature"] != 0.5 || pre.paths[0] != "/v1/chat/completions" {
		t.Errorf("prefill leg %s %v, want do_remote_decode, not streamed, one token, the rest as sent", pre.paths[0], p)
	}
	kv, _ = d["kv_transfer_params"].(map[string]any)
	if kv["do_remote_prefill"] != true || kv["remote_engine_id"] != "p" || d["stream"] != true || d["stream_options"] == nil ||
		d["max_tokens"] != 7.0 || d["max_completion_tokens"] != nil || d["min_tokens"] != nil || d["temperature"] != 0.5 {
		t.Errorf("decode leg %v, want the client's body with the prefill's kv_transfer_params", d)
	}
	id := pre.heads[0].Get(RequestIDHeader)
	if id == "" || dec.heads[0].Get(RequestIDHeader) != id {
		t.Errorf("request ids %q and %q, want one on both legs", id, dec.heads[0].Get(RequestIDHeader))
	}
	if pre.heads[0].Get(DefaultHeader) != "" || dec.heads[0].Get(DefaultHeader) != "" {
		t.Errorf("the header reached a leg")
	}
	// A prefill answer without kv_transfer_params: decoded with null.
	pre.answer = jsonAnswer(200, `{"choices":[]}`)
	post(t, url+"/v1/completions", `{"model":"m","prompt":"p"}`, DefaultHeader, preAddr)
	if d := dec.bodies[1]; d["kv_transfer_params"] != nil || d["max_tokens"] != nil || d["stream"] != nil {
		t.Errorf("decode leg after an answer without kv_transfer_params: %v, want it null and the client's fields", d)
	}
}

// Failures answer as llm-d's sidecar does.
func TestFailureAnswers(t *testing.T) {
	dead := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	dec := &recorder{answer: jsonAnswer(200, `{}`)}
	decAddr := upstream(t, dec)
	url := sidecar(t, decAddr)
	overloaded := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3")
		jsonAnswer(503, `{"object":"error","message":"busy"}`)(w, nil)
	}))
	notJSON := upstream(t, jsonAnswer(200, `<html>`))
	tests := []struct {
		name, body, prefill string
		status              int
		bodyHas, header     string
	}{
		{"prefill unreachable", clientBody, dead, 502, `"type":"BadGateway"`, ""},
		{"prefill answers 503", clientBody, overloaded, 503, `"message":"busy"`, "3"},
		{"prefill answer not JSON", clientBody, notJSON, 400, `"type":"BadRequestError"`, ""},
		{"request not JSON", `{"model":`, overloaded, 400, `"type":"BadRequestError"`, ""},
		{"request not an object", `[1]`, overloaded, 400, `"object":"error"`, ""},
		{"request too large", `{"x":"` + strings.Repeat("a", 5<<10) + `"}`, overloaded, 413, `"code":413`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, url+"/v1/chat/completions", tt.body, DefaultHeader, tt.prefill)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.bodyHas) || resp.Header.Get("Retry-After") != tt.header {
				t.Errorf("answer %d %s (Retry-After %q), want %d with %s", resp.StatusCode, b, resp.Header.Get("Retry-After"), tt.status, tt.bodyHas)
			}
		})
	}
	if n := dec.count(); n != 0 {
		t.Errorf("the decode engine got %d requests, want none: every prefill leg failed", n)
	}
	// The local engine down: 503, with or without a prefill.
	down := sidecar(t, dead)
	for _, h := range [][]string{nil, {DefaultHeader, upstream(t, jsonAnswer(200, `{}`))}} {
		if resp, b := post(t, down+"/v1/chat/completions", clientBody, h...); resp.StatusCode != 503 || !strings.Contains(string(b), "ServiceUnavailable") {
			t.Errorf("decode engine down (header %v): %d %s, want 503", h, resp.StatusCode, b)
		}
	}
}

// A streamed decode leg reaches the client chunk by chunk: the first
// event is read while the engine still holds the rest back.
func TestStreamPassThrough(t *testing.T) {
	release := make(chan struct{})
	dec := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	pre := upstream(t, jsonAnswer(200, `{"kv_transfer_params":{"do_remote_prefill":true}}`))
	url := sidecar(t, dec)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(clientBody))
	req.Header.Set(DefaultHeader, pre)
	// Bounded: a stream held back would block the read below.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "data: {\"n\":1}\n" {
		t.Fatalf("first line %q, %v; want the first event before the engine went on", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "data: [DONE]") || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("rest %q (%s), want the stream's end", rest, resp.Header.Get("Content-Type"))
	}
}

// With simulated engines as both halves: the prefill instance does one
// prefill leg and the decode engine receives its KV, so the prompt is
// cached there; the answer reports the prefill instance's cache hit
// (none, then the whole prompt but its last token); streamed and not.
func TestWithEngines(t *testing.T) {
	engine := func(name string) string {
		s, err := httpengine.New(httpengine.Options{TimeScale: 50, OutputTokens: 4, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(func() { hs.Close(); cancel(); <-done })
		return strings.TrimPrefix(hs.URL, "http://")
	}
	pre, dec := engine("prefill"), engine("decode")
	url := sidecar(t, dec)
	metric := func(addr, name string) string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, name+"{") {
				return l[strings.LastIndexByte(l, ' ')+1:]
			}
		}
		return ""
	}
	type usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	content, _ := json.Marshal(strings.Repeat("Prefilled remotely, decoded here. ", 50))
	body := `{"model":"m","messages":[{"role":"user","content":` + string(content) + `}],"max_tokens":4`
	resp, b := post(t, url+"/v1/chat/completions", body+`}`, DefaultHeader, pre)
	var got struct{ Usage usage }
	if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil {
		t.Fatalf("answer %d %s", resp.StatusCode, b)
	}
	if got.Usage.CompletionTokens != 4 || got.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("usage %+v, want 4 tokens and the prefill's cache hit (none)", got.Usage)
	}
	if legs := metric(pre, "dualmap_engine_prefill_legs_total"); legs != "1" {
		t.Errorf("prefill engine served %s prefill legs, want 1", legs)
	}
	if v := metric(dec, "dualmap_engine_kv_received_tokens_total"); v == "0" || v == "" {
		t.Errorf("decode engine received %q tokens of KV, want the prompt's", v)
	}
	if hits := metric(dec, "vllm:prefix_cache_hits_total"); hits != strconv.Itoa(got.Usage.PromptTokens-1) {
		t.Errorf("decode engine's prefix cache hits %s, want %d (the received prompt but its last token)", hits, got.Usage.PromptTokens-1)
	}
	resp, b = post(t, url+"/v1/chat/completions", body+`,"stream":true,"stream_options":{"include_usage":true}}`, DefaultHeader, pre)
	if resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Count(string(b), "data: ") != 7 {
		t.Fatalf("streamed: %d %q, want 4 token chunks, the closing chunk, usage and [DONE]", resp.StatusCode, b)
	}
	events := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
	var last struct{ Usage *usage }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[len(events)-2], "data: ")), &last); err != nil || last.Usage == nil {
		t.Fatalf("usage chunk %q: %v", events[len(events)-2], err)
	}
	if c := last.Usage.PromptTokensDetails.CachedTokens; c != got.Usage.PromptTokens-1 {
		t.Errorf("streamed usage cached_tokens %d, want %d (the prefill instance holds the prompt now)", c, got.Usage.PromptTokens-1)
	}
	if legs := metric(pre, "dualmap_engine_prefill_legs_total"); legs != "2" {
		t.Errorf("prefill engine served %s prefill legs, want 2 (the streamed request's not streamed)", legs)
	}
}

// The decode answer's usage: set to the prefill's cached tokens, whole or
// streamed (lines split across writes), and left alone where it has none,
// is not JSON, is an error or is over the bound.
func TestUsageRewrite(t *testing.T) {
	run := func(status int, ctype string, max int, writes ...string) string {
		rec := httptest.NewRecorder()
		u := &usageWriter{w: rec, cached: 42, max: max}
		u.Header().Set("Content-Type", ctype)
		u.Header().Set("Content-Length", "999")
		u.WriteHeader(status)
		for _, w := range writes {
			u.Write([]byte(w))
			u.Flush()
		}
		u.finish()
		if status == 200 && rec.Header().Get("Content-Length") != "" {
			t.Errorf("Content-Length kept on a rewritten answer")
		}
		return rec.Body.String()
	}
	const js = "application/json"
	for _, tt := range []struct {
		name   string
		status int
		ctype  string
		max    int
		writes []string
		want   string
	}{
		{"whole", 200, js, 1 << 10, []string{`{"id":"a","usage":{"prompt_tokens":9,`, `"prompt_tokens_details":{"cached_tokens":8}}}`},
			`{"id":"a","usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":42}}}`},
		{"details null", 200, js, 1 << 10, []string{`{"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}`},
			`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":42}}}`},
		{"no usage", 200, js, 1 << 10, []string{`{"id":"a", "x":1}`}, `{"id":"a", "x":1}`},
		{"not JSON", 200, js, 1 << 10, []string{`<html>`}, `<html>`},
		{"error", 500, js, 1 << 10, []string{`{"usage":{}}`}, `{"usage":{}}`},
		{"over the bound", 200, js, 8, []string{`{"usage":{"prompt_tokens":1}}`}, `{"usage":{"prompt_tokens":1}}`},
		{"stream", 200, "text/event-stream", 1 << 10, []string{"data: {\"choices\":[1]}\n\ndata: {\"usage\":{\"prompt_tok", "ens\":3}}\n\ndata: [DONE]\n\n"},
			"data: {\"choices\":[1]}\n\ndata: {\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":42}}}\n\ndata: [DONE]\n\n"},
		{"stream without a final newline", 200, "text/event-stream", 1 << 10, []string{`data: {"usage":{}}`}, `data: {"usage":{"prompt_tokens_details":{"cached_tokens":42}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(tt.status, tt.ctype, tt.max, tt.writes...); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, o := range []Options{{}, {Decode: "nohost"}, {Decode: "127.0.0.1:1", MaxBodyBytes: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// Any answer, cut anywhere: no panic, and what carries no usage passes
// unchanged.
func FuzzUsageWriter(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens_details":{"cached_tokens":3}}}`), uint8(5), true)
	f.Add([]byte("data: {\"usage\":null}\n\ndata: [DONE]\n\n"), uint8(9), true)
	f.Add([]byte("data: {\"x\":1}\r\n\r\n"), uint8(0), false)
	f.Fuzz(func(t *testing.T, body []byte, cut uint8, sse bool) {
		rec := httptest.NewRecorder()
		u := &usageWriter{w: rec, cached: 7, max: 64}
		if sse {
			u.Header().Set("Content-Type", "text/event-stream")
		}
		at := int(cut) % (len(body) + 1)
		u.Write(body[:at])
		u.Flush()
		u.Write(body[at:])
		u.finish()
		if !bytes.Contains(body, []byte(`"usage"`)) && !bytes.Equal(rec.Body.Bytes(), body) {
			t.Errorf("body without usage changed: %q -> %q", body, rec.Body.Bytes())
		}
	})
}
