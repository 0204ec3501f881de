package replay

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

func TestRunFailures(t *testing.T) {
	f := newFakeServer(t, fakeConfig{status: func(n int) int {
		switch n % 4 {
		case 1:
			return 429
		case 3:
			return 503
		}
		return 0
	}})
	results, sum, err := Run(context.Background(), synthTrace(20, 0), Options{URL: f.URL, Stream: true})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	want := map[int]int{200: 10, 429: 5, 503: 5}
	if sum.OK != 10 || sum.Failed != 10 || len(sum.ByStatus) != 3 || sum.ByStatus[200] != 10 || sum.ByStatus[429] != 5 || sum.ByStatus[503] != 5 {
		t.Errorf("Run() summary OK %d, Failed %d, ByStatus %v, want 10, 10, %v", sum.OK, sum.Failed, sum.ByStatus, want)
	}
	for _, r := range results {
		if !r.OK() && !strings.HasPrefix(r.Err, "overloaded (request") {
			t.Errorf("Run() failed result Err = %q, want the error body", r.Err)
		}
	}
}

func TestRunTransportError(t *testing.T) {
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	results, sum, err := Run(context.Background(), synthTrace(3, 0), Options{URL: url, Stream: true})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if sum.Failed != 3 || sum.ByStatus[0] != 3 || results[0].Err == "" || results[0].Status != 0 {
		t.Errorf("Run() = %+v, summary %+v, want 3 failures with no status", results, sum)
	}
}

func TestRunTimeout(t *testing.T) {
	f := newFakeServer(t, fakeConfig{hold: true})
	results, sum, err := Run(context.Background(), synthTrace(2, 0), Options{URL: f.URL, Stream: true, Timeout: 100 * time.Millisecond})
	if err != nil || sum.Failed != 2 {
		t.Fatalf("Run() = %d failed, %v, want 2 failed, nil", sum.Failed, err)
	}
	for _, r := range results {
		if r.Err != "timeout after 100ms" || r.Status != 200 {
			t.Errorf("Run() result Err = %q, Status %d, want \"timeout after 100ms\", 200", r.Err, r.Status)
		}
	}
}

func TestRunCancel(t *testing.T) {
	f := newFakeServer(t, fakeConfig{hold: true})
	tr := synthTrace(6, 0)
	for i := 3; i < 6; i++ {
		tr.Requests[i].Arrival = time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	results, sum, err := Run(ctx, tr, Options{URL: f.URL, Stream: true})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run() error = %v, want %v", err, context.Canceled)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Run() returned %v after start, want soon after the cancellation at 200ms", elapsed)
	}
	if len(results) != 3 || sum.Failed != 3 {
		t.Fatalf("Run() = %d results, %d failed, want 3, 3", len(results), sum.Failed)
	}
	for _, r := range results {
		if r.Err != "cancelled" {
			t.Errorf("Run() result Err = %q, want \"cancelled\"", r.Err)
		}
	}
}

func TestRunInvalid(t *testing.T) {
	tr := synthTrace(2, 0)
	tests := []struct {
		name string
		tr   *trace.Trace
		opt  Options
	}{
		{"no URL", tr, Options{}},
		{"bad scheme", tr, Options{URL: "ftp://x"}},
		{"no host", tr, Options{URL: "http://"}},
		{"bad endpoint", tr, Options{URL: "http://x", Endpoint: "embeddings"}},
		{"negative QPS", tr, Options{URL: "http://x", QPS: -1}},
		{"negative requests", tr, Options{URL: "http://x", Requests: -1}},
		{"negative concurrency", tr, Options{URL: "http://x", Concurrency: -1}},
		{"negative scale", tr, Options{URL: "http://x", ScaleTokens: -1}},
		{"negative timeout", tr, Options{URL: "http://x", Timeout: -1}},
		{"nil trace", nil, Options{URL: "http://x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results, _, err := Run(context.Background(), tt.tr, tt.opt)
			if !errors.Is(err, ErrInvalidOptions) || results != nil {
				t.Errorf("Run() = %v, %v, want nil, %v", results, err, ErrInvalidOptions)
			}
		})
	}
}
