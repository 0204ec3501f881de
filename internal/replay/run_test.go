package replay

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// synthTrace returns n requests gap apart with 32-token blocks: 40 input
// tokens over a shared block 1 and a block of their own, 8 output tokens.
func synthTrace(n int, gap time.Duration) *trace.Trace {
	tr := &trace.Trace{BlockSize: 32}
	for i := range n {
		tr.Requests = append(tr.Requests, trace.Request{
			Arrival: time.Duration(i) * gap, InputTokens: 40, OutputTokens: 8, Blocks: []uint64{1, uint64(100 + i)},
		})
	}
	return tr
}

func TestRunStream(t *testing.T) {
	const firstDelay, gap = 150 * time.Millisecond, 50 * time.Millisecond
	f := newFakeServer(t, fakeConfig{firstDelay: firstDelay, chunks: 3, chunkGap: gap})
	tr := synthTrace(4, 10*time.Millisecond)
	var progress bytes.Buffer
	opt := Options{URL: f.URL, Stream: true, Seed: 9, Headers: map[string]string{"x-slo-class": "gold"}, Progress: &progress}
	results, sum, err := Run(context.Background(), tr, opt)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(results) != 4 || sum.OK != 4 {
		t.Fatalf("Run() = %d results, %d ok, want 4, 4: %+v", len(results), sum.OK, results)
	}
	p := NewPrompter(9, 32, 1)
	for i, r := range results {
		if r.Index != i || !r.Usage || r.PromptTokens != 40 || r.CachedTokens != 20 || r.CompletionTokens != 3 {
			t.Errorf("Run() result %d = %+v, want index %d and usage 40/20/3", i, r, i)
		}
		if r.TTFT < firstDelay || r.E2E-r.TTFT < gap {
			t.Errorf("Run() result %d TTFT = %v, E2E = %v, want TTFT >= %v (first content) and E2E - TTFT >= %v", i, r.TTFT, r.E2E, firstDelay, gap)
		}
		if r.Instance != "e0" && r.Instance != "e1" {
			t.Errorf("Run() result %d Instance = %q, want e0 or e1", i, r.Instance)
		}
	}
	if sum.HitRate != 0.5 || sum.UsageReported != 4 || len(sum.PerInstance) != 2 || sum.PerInstance["e0"].Requests != 2 {
		t.Errorf("Run() summary = %+v, want hit rate 0.5 over 4 and 2 requests on each of e0, e1", sum)
	}
	if sum.TTFT.P50 < firstDelay || sum.TTFT.P99 >= sum.E2E.P99 {
		t.Errorf("Run() summary TTFT = %+v, E2E = %+v", sum.TTFT, sum.E2E)
	}
	reqs, _ := f.snapshot()
	want := []string{p.Prompt([]uint64{1, 100}, 40), p.Prompt([]uint64{1, 101}, 40), p.Prompt([]uint64{1, 102}, 40), p.Prompt([]uint64{1, 103}, 40)}
	var got []string
	for _, r := range reqs {
		got = append(got, r.text())
		if r.Model != DefaultModel || r.MaxTokens != 8 || !r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage ||
			len(r.Messages) != 1 || r.Messages[0].Role != "user" || r.IgnoreEOS {
			t.Errorf("server got %+v, want one user message, model %s, max_tokens 8, stream with usage", r, DefaultModel)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("server got prompts %q, want %q", got, want)
	}
	f.mu.Lock()
	for i, h := range f.headers {
		if h.Get("x-slo-class") != "gold" || f.paths[i] != "/v1/chat/completions" {
			t.Errorf("request %d: path %s, x-slo-class %q, want /v1/chat/completions, gold", i, f.paths[i], h.Get("x-slo-class"))
		}
	}
	f.mu.Unlock()
	if !strings.Contains(progress.String(), "4/4 done") || !strings.HasSuffix(progress.String(), "\n") {
		t.Errorf("progress = %q, want a line with 4/4 done", progress.String())
	}
}

func TestRunEndpoints(t *testing.T) {
	const firstDelay = 100 * time.Millisecond
	f := newFakeServer(t, fakeConfig{firstDelay: firstDelay, chunks: 2, chunkGap: 60 * time.Millisecond})
	tests := []struct {
		name     string
		url      string
		endpoint string
		stream   bool
		wantPath string
	}{
		{"chat stream", f.URL, "", true, "/v1/chat/completions"},
		{"chat", f.URL + "/", EndpointChat, false, "/v1/chat/completions"},
		{"completions stream", f.URL + "/v1", EndpointCompletions, true, "/v1/completions"},
		{"completions", f.URL + "/v1/", EndpointCompletions, false, "/v1/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.mu.Lock()
			f.paths = nil
			f.mu.Unlock()
			results, sum, err := Run(context.Background(), synthTrace(2, 0), Options{URL: tt.url, Endpoint: tt.endpoint, Stream: tt.stream, IgnoreEOS: true})
			if err != nil || sum.OK != 2 {
				t.Fatalf("Run() = %+v, %v, want 2 ok", results, err)
			}
			for _, r := range results {
				if !r.Usage || r.PromptTokens != 40 || r.TTFT < firstDelay {
					t.Errorf("Run() result = %+v, want usage and TTFT >= %v", r, firstDelay)
				}
				if tt.stream && r.TTFT >= r.E2E || !tt.stream && r.TTFT != r.E2E {
					t.Errorf("Run() TTFT = %v, E2E = %v, want TTFT < E2E for streams, = otherwise", r.TTFT, r.E2E)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, p := range f.paths {
				if p != tt.wantPath {
					t.Errorf("server path = %s, want %s", p, tt.wantPath)
				}
			}
		})
	}
}

func TestRunTokens(t *testing.T) {
	f := newFakeServer(t, fakeConfig{})
	tests := []struct {
		name          string
		in, out       int
		scale         float64
		maxOutput     int
		wantPromptLen int
		wantMaxTokens int
	}{
		{"default cap", 1000, 500, 0, 0, 4000, DefaultMaxOutput},
		{"no cap", 1000, 500, 1, -1, 4000, 500},
		{"scaled", 1000, 500, 0.1, 0, 400, 50},
		{"scaled and capped", 1000, 500, 0.1, 20, 400, 20},
		{"no output", 10, 0, 1, 0, 40, 1},
		{"scaled to nothing", 10, 10, 0.01, 0, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &trace.Trace{BlockSize: 512, Requests: []trace.Request{{InputTokens: tt.in, OutputTokens: tt.out, Blocks: []uint64{1, 2}}}}
			f.mu.Lock()
			f.requests = nil
			f.mu.Unlock()
			results, _, err := Run(context.Background(), tr, Options{URL: f.URL, ScaleTokens: tt.scale, MaxOutput: tt.maxOutput})
			if err != nil || len(results) != 1 || !results[0].OK() {
				t.Fatalf("Run() = %+v, %v, want one ok result", results, err)
			}
			reqs, _ := f.snapshot()
			if got := len(reqs[0].text()); got != tt.wantPromptLen || reqs[0].MaxTokens != tt.wantMaxTokens {
				t.Errorf("Run() sent a prompt of %d bytes, max_tokens %d, want %d, %d", got, reqs[0].MaxTokens, tt.wantPromptLen, tt.wantMaxTokens)
			}
			if r := results[0]; r.InputTokens != tt.wantPromptLen/4 || r.MaxTokens != tt.wantMaxTokens {
				t.Errorf("Run() result tokens = %d, %d, want %d, %d", r.InputTokens, r.MaxTokens, tt.wantPromptLen/4, tt.wantMaxTokens)
			}
		})
	}
}

func TestRunRate(t *testing.T) {
	f := newFakeServer(t, fakeConfig{chunks: 1})
	tr := synthTrace(100, time.Millisecond)
	start := time.Now()
	results, sum, err := Run(context.Background(), tr, Options{URL: f.URL, QPS: 50, Stream: true})
	elapsed := time.Since(start)
	if err != nil || sum.OK != 100 {
		t.Fatalf("Run() = %d ok, %v, want 100 ok", sum.OK, err)
	}
	// 99 gaps at 50 QPS: request i is due at i x 20 ms. Arrivals are never
	// early (a lower bound holds on a loaded machine; how late they are is
	// a performance figure, logged, not asserted).
	for i, r := range results {
		if due := time.Duration(i) * 20 * time.Millisecond; r.Sent < due-5*time.Millisecond {
			t.Fatalf("Run() sent request %d at %v, before its arrival time %v", i, r.Sent, due)
		}
	}
	if sum.TargetQPS != 50 || sum.AchievedQPS > 55 {
		t.Errorf("Run() AchievedQPS = %v, TargetQPS = %v, want at most about 50, 50", sum.AchievedQPS, sum.TargetQPS)
	}
	t.Logf("100 requests at 50 QPS: took %v (ideal 1.98s), achieved %.1f QPS", elapsed, sum.AchievedQPS)
	if tr.Requests[99].Arrival != 99*time.Millisecond {
		t.Errorf("Run() changed the trace: last arrival = %v, want 99ms", tr.Requests[99].Arrival)
	}
}

func TestRunOwnTimestamps(t *testing.T) {
	f := newFakeServer(t, fakeConfig{chunks: 1})
	tr := synthTrace(3, 200*time.Millisecond)
	results, sum, err := Run(context.Background(), tr, Options{URL: f.URL, Requests: 3})
	if err != nil || sum.OK != 3 {
		t.Fatalf("Run() = %d ok, %v, want 3 ok", sum.OK, err)
	}
	if s := results[2].Sent; s < 300*time.Millisecond || s > 600*time.Millisecond {
		t.Errorf("Run() sent the third request at %v, want about 400ms", s)
	}
	if sum.TargetQPS != 5 {
		t.Errorf("Run() TargetQPS = %v, want 5 (the trace's own rate)", sum.TargetQPS)
	}
}

func TestRunRequestsLimit(t *testing.T) {
	f := newFakeServer(t, fakeConfig{chunks: 1})
	results, sum, err := Run(context.Background(), synthTrace(10, 0), Options{URL: f.URL, Requests: 4})
	if err != nil || len(results) != 4 || sum.Requests != 4 {
		t.Errorf("Run(Requests: 4) = %d results, %d requests, %v, want 4, 4, nil", len(results), sum.Requests, err)
	}
}

func TestRunConcurrency(t *testing.T) {
	f := newFakeServer(t, fakeConfig{firstDelay: 100 * time.Millisecond})
	results, sum, err := Run(context.Background(), synthTrace(12, 0), Options{URL: f.URL, Concurrency: 3})
	if err != nil || sum.OK != 12 {
		t.Fatalf("Run() = %d ok, %v, want 12 ok", sum.OK, err)
	}
	_, maxInflight := f.snapshot()
	if maxInflight > 3 {
		t.Errorf("server saw %d requests in flight, want <= 3", maxInflight)
	}
	if sum.Delayed != 9 {
		t.Errorf("Run() Delayed = %d, want 9 (all arriving at once, 3 slots)", sum.Delayed)
	}
	if last := results[11]; last.Delay < 200*time.Millisecond {
		t.Errorf("Run() last request delayed %v, want >= 200ms (3 rounds of 100ms before it)", last.Delay)
	}
}
