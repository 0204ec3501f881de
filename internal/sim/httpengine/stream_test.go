package httpengine

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// chunk is the part of a stream chunk the tests read.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestStreamFraming(t *testing.T) {
	_, url := start(t, fast())
	tests := []struct {
		name       string
		path, body string
		object     string
		tokens     int
		finish     string
		usage      bool
	}{
		{"chat", "/v1/chat/completions", chatBody("hi", `,"stream":true`), "chat.completion.chunk", 8, "stop", false},
		{"chat with usage", "/v1/chat/completions", chatBody("hi", `,"stream":true,"max_tokens":5,"stream_options":{"include_usage":true}`), "chat.completion.chunk", 5, "length", true},
		{"completion", "/v1/completions", `{"model":"m","prompt":"abc","stream":true,"max_tokens":4}`, "text_completion", 4, "length", false},
		{"completion with usage", "/v1/completions", `{"model":"m","prompt":"abc","stream":true,"stream_options":{"include_usage":true}}`, "text_completion", 8, "stop", true},
		{"one token", "/v1/completions", `{"model":"m","prompt":"abc","stream":true,"max_tokens":1}`, "text_completion", 1, "length", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status, Content-Type = %d, %q, want 200, text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("x-engine-name") != "test-engine" {
				t.Errorf("x-engine-name = %q, want test-engine", resp.Header.Get("x-engine-name"))
			}
			evs := readEvents(t, resp.Body)
			want := tt.tokens + 2 // tokens, the closing chunk, [DONE]
			if tt.usage {
				want++
			}
			if len(evs) != want {
				t.Fatalf("events = %d, want %d", len(evs), want)
			}
			if evs[len(evs)-1].data != "[DONE]" {
				t.Errorf("last event = %q, want [DONE]", evs[len(evs)-1].data)
			}
			var text strings.Builder
			var id string
			for i, ev := range evs[:len(evs)-1] {
				var c chunk
				if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
					t.Fatalf("event %d %q is not JSON: %v", i, ev.data, err)
				}
				if c.Object != tt.object || c.Model != "m" {
					t.Errorf("event %d object, model = %q, %q, want %q, m", i, c.Object, c.Model, tt.object)
				}
				if id == "" {
					id = c.ID
				} else if c.ID != id {
					t.Errorf("event %d id = %q, want %q as in the first", i, c.ID, id)
				}
				if tt.usage && i == len(evs)-2 {
					if len(c.Choices) != 0 || c.Usage == nil || c.Usage.CompletionTokens != tt.tokens || c.Usage.TotalTokens != c.Usage.PromptTokens+tt.tokens {
						t.Errorf("usage chunk = %s, want no choices and %d completion tokens", ev.data, tt.tokens)
					}
					continue
				}
				if len(c.Choices) != 1 || c.Usage != nil {
					t.Fatalf("event %d = %s, want one choice and no usage", i, ev.data)
				}
				ch := c.Choices[0]
				last := i == tt.tokens
				if got := ch.FinishReason != nil; got != last {
					t.Errorf("event %d has finish_reason %v, want it only on the closing chunk", i, got)
				}
				if last && *ch.FinishReason != tt.finish {
					t.Errorf("finish_reason = %q, want %q", *ch.FinishReason, tt.finish)
				}
				piece := ""
				if tt.object == "text_completion" {
					if ch.Text == nil {
						t.Fatalf("event %d = %s, want a text", i, ev.data)
					}
					piece = *ch.Text
				} else {
					if ch.Delta == nil {
						t.Fatalf("event %d = %s, want a delta", i, ev.data)
					}
					if (ch.Delta.Role == "assistant") != (i == 0) {
						t.Errorf("event %d role = %q, want assistant on the first chunk only", i, ch.Delta.Role)
					}
					piece = ch.Delta.Content
				}
				if !last && piece == "" {
					t.Errorf("event %d carries no text", i)
				}
				text.WriteString(piece)
			}
			if text.String() != output(tt.tokens) {
				t.Errorf("streamed text = %q, want %q", text.String(), output(tt.tokens))
			}
		})
	}
}

func TestStreamPacing(t *testing.T) {
	opt := fast()
	opt.TimeScale = 20
	opt.OutputTokens = 100 // 99 decode steps of 30.8 ms: about 150 ms wall
	_, url := start(t, opt)
	req, err := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"pace me","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs := readEvents(t, resp.Body)
	if len(evs) != 102 {
		t.Fatalf("events = %d, want 102", len(evs))
	}
	first, mid, last := evs[0].at, evs[50].at, evs[99].at
	span := last.Sub(first)
	if span < 75*time.Millisecond {
		t.Errorf("first to last token chunk took %v, want >= 75ms (about 150ms)", span)
	}
	if mid.Sub(first) < span/5 || last.Sub(mid) < span/5 {
		t.Errorf("chunk 50 came %v after the first and %v before the last: want it in the middle", mid.Sub(first), last.Sub(mid))
	}
}

// A client that leaves mid-stream leaves no goroutine behind, and the
// engine still finishes its request.
func TestClientCancelMidStream(t *testing.T) {
	opt := fast()
	opt.TimeScale = 20
	opt.OutputTokens = 200 // about 300 ms wall of decoding
	s, url := start(t, opt)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	base := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(chatBody("leave early", `,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: ") {
		t.Fatalf("first line = %q, want a data event", sc.Text())
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the engine to finish the abandoned request", func() bool {
		v := s.Snapshot()
		return v.InFlight == 0 && v.Waiting == 0 && v.Running == 0 && v.Engine.Completed == 1
	})
	if got := s.Snapshot().GenerationTokens; got != 200 {
		t.Errorf("Snapshot().GenerationTokens = %d, want 200", got)
	}
	tr.CloseIdleConnections()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// When Run stops, waiting requests are answered 503 rather than hanging.
func TestRunStopped(t *testing.T) {
	s, err := New(fast())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	cancel()
	<-done
	tests := []struct{ name, body string }{
		{"whole", chatBody("x", "")},
		{"stream", chatBody("x", `,"stream":true`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, mustRequest(t, "POST", "/v1/chat/completions", tt.body))
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("POST after Run stopped = %d, want 503", w.Code)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Errorf("second Run() did not panic")
		}
	}()
	s.Run(context.Background())
}
