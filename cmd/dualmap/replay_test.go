package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// replayServer answers chat completions streams; every failEvery-th
// request (if > 0) gets a 503.
func replayServer(t *testing.T, failAll bool) (*httptest.Server, *atomic.Value) {
	t.Helper()
	var hdr atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr.Store(r.Header.Get("x-slo-class"))
		if failAll {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("x-dualmap-instance", "10.0.0.1:8000")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &hdr
}

func writeReplayTrace(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.jsonl")
	lines := `{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [0, 1]}
{"timestamp": 10, "input_length": 700, "output_length": 10, "hash_ids": [0, 2]}
{"timestamp": 20, "input_length": 100, "output_length": 10, "hash_ids": [3]}
`
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayCommand(t *testing.T) {
	srv, hdr := replayServer(t, false)
	tracePath := writeReplayTrace(t)
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"replay", "--trace", tracePath, "--url", srv.URL, "--qps", "100", "--scale-tokens", "0.1",
		"--header", "x-slo-class=gold", "--json", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap replay exited %d: %s", code, stderr.String())
	}
	for _, w := range []string{"3 sent: 3 ok", "hit rate  40.0%", "10.0.0.1:8000", "TTFT"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, stdout.String())
		}
	}
	if got := hdr.Load(); got != "gold" {
		t.Errorf("server got x-slo-class %v, want gold", got)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Summary map[string]any   `json:"summary"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	if rep.Summary["ok"] != 3.0 || len(rep.Results) != 3 || rep.Results[0]["input_tokens"] != 60.0 {
		t.Errorf("report = %s", b)
	}
}

func TestReplayCommandErrors(t *testing.T) {
	down, _ := replayServer(t, true)
	tracePath := writeReplayTrace(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no trace", []string{"replay", "--url", "http://x"}, 2, "--trace FILE is required"},
		{"no url", []string{"replay", "--trace", tracePath}, 2, "--url URL (or --write-trace FILE) is required"},
		{"bad endpoint", []string{"replay", "--trace", tracePath, "--url", "http://x", "--endpoint", "embeddings"}, 2, "Endpoint"},
		{"bad url", []string{"replay", "--trace", tracePath, "--url", "x:y"}, 2, "URL"},
		{"bad header", []string{"replay", "--trace", tracePath, "--url", "http://x", "--header", "nokey"}, 2, "not key=value"},
		{"bad max-output", []string{"replay", "--trace", tracePath, "--url", "http://x", "--max-output", "0"}, 2, "--max-output"},
		{"missing file", []string{"replay", "--trace", "/nonexistent.jsonl", "--url", "http://x"}, 1, "no such file"},
		{"all failed", []string{"replay", "--trace", tracePath, "--url", down.URL, "--quiet"}, 1, "all 3 requests failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.wantCode || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) = %d, stderr %q, want %d and %q", tt.args, code, stderr.String(), tt.wantCode, tt.want)
			}
		})
	}
}

// TestReplayWriteTrace: --write-trace sends nothing and writes the scaled
// requests as a Mooncake trace that reads back in 512-token blocks.
func TestReplayWriteTrace(t *testing.T) {
	tracePath := writeReplayTrace(t)
	out := filepath.Join(t.TempDir(), "w.jsonl")
	var stdout, stderr bytes.Buffer
	code := run([]string{"replay", "--trace", tracePath, "--requests", "2", "--scale-tokens", "2", "--max-output", "15",
		"--write-trace", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap replay --write-trace exited %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// 600 and 700 tokens doubled, in 512-token blocks; old block 0 (1,024
	// tokens after scaling) is shared: two new blocks; the output is 10
	// doubled, capped at 15.
	want := `{"timestamp": 0, "input_length": 1200, "output_length": 15, "hash_ids": [0, 1, 2]}
{"timestamp": 10, "input_length": 1400, "output_length": 15, "hash_ids": [0, 1, 3]}
`
	if string(got) != want {
		t.Errorf("--write-trace wrote\n%s\nwant\n%s", got, want)
	}
	for _, args := range [][]string{
		{"replay", "--trace", tracePath, "--url", "http://127.0.0.1:1", "--write-trace", out},
		{"replay", "--trace", tracePath, "--write-trace", out, "--write-block-size", "0"},
		{"replay", "--trace", tracePath},
	} {
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("dualmap %v exited %d, want 2 (usage): %s", args, code, stderr.String())
		}
	}
}
