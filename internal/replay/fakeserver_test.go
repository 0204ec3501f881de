package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeConfig controls a fakeServer.
type fakeConfig struct {
	firstDelay time.Duration     // before the first content chunk (after a role-only chunk)
	chunks     int               // content chunks; default 3
	chunkGap   time.Duration     // between content chunks
	hold       bool              // send the headers, then nothing until the client goes away
	status     func(n int) int   // status of the n-th request (from 0); 0 or nil: 200
	noUsage    bool              // never report usage
	header     map[string]string // extra response headers
}

// fakeRequest is what fakeServer reads of a request.
type fakeRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Prompt        string `json:"prompt"`
	MaxTokens     int    `json:"max_tokens"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
}

func (r fakeRequest) text() string {
	if len(r.Messages) > 0 {
		return r.Messages[0].Content
	}
	return r.Prompt
}

// fakeServer is an OpenAI-compatible server for tests. It answers every
// request with chunks "tok0", "tok1", ...; it reports usage with
// prompt_tokens = ceil(len(prompt)/4) and cached_tokens half of that, and
// names instance e0 or e1 (alternately) in x-engine-name. Streams split
// every content event across two writes.
type fakeServer struct {
	*httptest.Server
	cfg fakeConfig

	mu                    sync.Mutex
	count                 int
	inflight, maxInflight int
	requests              []fakeRequest // in arrival order
	paths                 []string
	headers               []http.Header
}

func newFakeServer(t *testing.T, cfg fakeConfig) *fakeServer {
	t.Helper()
	if cfg.chunks == 0 {
		cfg.chunks = 3
	}
	f := &fakeServer{cfg: cfg}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) snapshot() (reqs []fakeRequest, maxInflight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...), f.maxInflight
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := f.count
	f.count++
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	f.requests = append(f.requests, req)
	f.paths = append(f.paths, r.URL.Path)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	ctx := r.Context()
	if f.cfg.status != nil {
		if code := f.cfg.status(n); code != 0 && code != http.StatusOK {
			http.Error(w, fmt.Sprintf("overloaded (request %d)", n), code)
			return
		}
	}
	w.Header().Set("x-engine-name", fmt.Sprintf("e%d", n%2))
	for k, v := range f.cfg.header {
		w.Header().Set(k, v)
	}
	if f.cfg.hold {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-ctx.Done()
		return
	}
	prompt := (len(req.text()) + 3) / 4
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		prompt, f.cfg.chunks, prompt+f.cfg.chunks, prompt/2)
	chat := len(req.Messages) > 0
	if !req.Stream {
		if !sleep(ctx, f.cfg.firstDelay+time.Duration(f.cfg.chunks)*f.cfg.chunkGap) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		choice := `{"index":0,"text":"tok0 tok1","finish_reason":"length"}`
		if chat {
			choice = `{"index":0,"message":{"role":"assistant","content":"tok0 tok1"},"finish_reason":"length"}`
		}
		body := `{"id":"x","object":"chat.completion","choices":[` + choice + `]`
		if !f.cfg.noUsage {
			body += `,"usage":` + usage
		}
		fmt.Fprint(w, body+"}")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	fl := w.(http.Flusher)
	send := func(event string) bool {
		half := len(event) / 2
		fmt.Fprint(w, event[:half])
		fl.Flush()
		if !sleep(ctx, time.Millisecond) {
			return false
		}
		fmt.Fprint(w, event[half:])
		fl.Flush()
		return true
	}
	delta := func(s string) string {
		if chat {
			return `{"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}`
		}
		return `{"choices":[{"index":0,"text":"` + s + `"}]}`
	}
	if chat && !send(": keep-alive comment\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n") {
		return
	}
	if !sleep(ctx, f.cfg.firstDelay) {
		return
	}
	for i := range f.cfg.chunks {
		if i > 0 && !sleep(ctx, f.cfg.chunkGap) {
			return
		}
		if !send("data: " + delta(fmt.Sprintf("tok%d ", i)) + "\r\n\r\n") {
			return
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !f.cfg.noUsage {
		if !send(`data: {"choices":[],"usage":` + usage + "}\n\n") {
			return
		}
	}
	send("data: [DONE]\n\n")
}

// sleep waits for d or the end of ctx, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
