package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/httpengine"
)

func TestEngineCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no listen", []string{"engine"}, "--listen ADDR is required"},
		{"bad profile", []string{"engine", "--listen", "127.0.0.1:0", "--profile", "h100-dreams"}, "profile"},
		{"bad error rate", []string{"engine", "--listen", "127.0.0.1:0", "--error-rate", "2"}, "error rate"},
		{"bad time scale", []string{"engine", "--listen", "127.0.0.1:0", "--time-scale", "-1"}, "TimeScale"},
		{"bad flag", []string{"engine", "--listen", "127.0.0.1:0", "--warp", "9"}, "warp"},
		{"bad engine model", []string{"engine", "--listen", "127.0.0.1:0", "--engine-model", "fast"}, "engine_model"},
		{"negative noise", []string{"engine", "--listen", "127.0.0.1:0", "--prefill-noise", "11"}, "prefill_noise"},
		{"extra argument", []string{"engine", "--listen", "127.0.0.1:0", "now"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) = %d, stderr %q, want 2 and %q", tt.args, code, stderr.String(), tt.want)
			}
		})
	}
}

func TestServeEngineLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	cfg := engineConfig{
		listen: "127.0.0.1:0",
		grace:  5 * time.Second,
		opt:    httpengine.Options{TimeScale: 20, OutputTokens: 100},
	}
	go func() { errc <- serveEngine(ctx, cfg, func(addr string) { ready <- addr }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("serveEngine() = %v before ready", err)
	case <-time.After(5 * time.Second):
		t.Fatal("serveEngine() never became ready")
	}
	url := "http://" + addr

	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("x-engine-name") != addr {
		t.Errorf("GET /v1/models = %d, x-engine-name %q, want 200 and %q (the default name is the address)",
			resp.StatusCode, resp.Header.Get("x-engine-name"), addr)
	}

	// A stream in flight when the signal comes finishes.
	resp, err = http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"finish me","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line = %q, %v, want a data event", line, err)
	}
	cancel()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading the rest of the stream: %v", err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream cut by the shutdown: ends %q, want data: [DONE]", rest[max(0, len(rest)-40):])
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("serveEngine() = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serveEngine() did not return after the context ended")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Errorf("GET /health after shutdown succeeded, want a connection error")
	}
}

func TestServeEngineListenError(t *testing.T) {
	err := serveEngine(context.Background(), engineConfig{listen: "256.0.0.1:1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("serveEngine(bad address) = %v, want a listen error", err)
	}
}
