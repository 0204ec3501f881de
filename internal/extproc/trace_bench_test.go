package extproc

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/internal/telemetry"
	"github.com/dualmap/dualmap/scheduler"
)

// BenchmarkTracing measures one request's whole stream on the router's
// side, without gRPC (request headers with a traceparent, a 2 KB chat body
// routed, response headers, end): "off" with no tracer, "on" with the OTLP
// exporter the OTEL_* environment names (100% sampling: run it with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a real Jaeger, e.g. `make jaeger`;
// skipped without one). The difference is tracing's cost per decision.
func BenchmarkTracing(b *testing.B) {
	benchOffOn(b, benchStream)
}

// benchOffOn runs bench "off" (no tracer) and "on" (the OTLP exporter the
// OTEL_* environment names, 100% sampling; skipped without an endpoint).
func benchOffOn(b *testing.B, bench func(*testing.B, Options)) {
	b.Run("off", func(b *testing.B) { bench(b, Options{}) })
	b.Run("on", func(b *testing.B) {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
			b.Skip("OTEL_EXPORTER_OTLP_ENDPOINT is not set: no exporter to measure")
		}
		tel, err := telemetry.Setup(context.Background(), "dualmap-bench", config.Tracing{Sampler: "always_on"}, os.Getenv)
		if err != nil {
			b.Fatal(err)
		}
		defer tel.Shutdown(context.Background())
		bench(b, Options{Tracer: tel.Tracer()})
	})
}

func benchStream(b *testing.B, opt Options) {
	srv, err := New(parseConfig(b, fourInstances), opt)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i] = []byte(benchChat(4, 2<<10, string(rune('a'+i%26))+" question?"))
	}
	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: hdrs(":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json",
			"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	respHeaders := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", "200"), EndOfStream: true}}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	runtime.LockOSThread() // threadCPU measures this goroutine alone
	defer runtime.UnlockOSThread()
	cpu0, thr0 := processCPU(), threadCPU()
	defer reportCPU(b, cpu0, thr0)
	for i := 0; i < b.N; i++ {
		st := newStream(srv, ctx)
		if _, err := st.handle(headers); err != nil {
			b.Fatal(err)
		}
		r, err := st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: bodies[i%len(bodies)], EndOfStream: true}}})
		if err != nil || r.GetRequestBody() == nil {
			b.Fatalf("body answer %v, %v", r, err)
		}
		if _, err := st.handle(respHeaders); err != nil {
			b.Fatal(err)
		}
		st.finish()
	}
}

// BenchmarkTraceHooks measures the tracing hooks of one request alone (span
// start from the client's traceparent, tokenize child span, decision
// attributes with 4 candidates, context injection, response, first token,
// end), with the exporter the OTEL_* environment names (skipped without
// one), or a nil tracer ("off": the nil checks).
func BenchmarkTraceHooks(b *testing.B) {
	benchOffOn(b, benchHooks)
}

func benchHooks(b *testing.B, opt Options) {
	srv, err := New(parseConfig(b, fourInstances), opt)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	h := &extprocv3.HttpHeaders{Headers: hdrs(":method", "POST", ":path", "/v1/chat/completions",
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}
	p := srv.pools.Default()
	body, err := openai.Parse("POST", "/v1/chat/completions", "application/json", []byte(benchChat(4, 2<<10, "hello")), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	r, err := p.Tokenize(body, pool.Controls{})
	if err != nil {
		b.Fatal(err)
	}
	var e scheduler.Explain
	dec := scheduler.Decision{Instance: "10.0.0.1:8000", Fallback: "10.0.0.2:8000", Reason: scheduler.ReasonCache,
		KeyDepth: 2, CachedTokens: 300, EstimatedTTFT: 40 * time.Millisecond}
	for k := range 4 {
		e.Candidates[k] = scheduler.Candidate{ID: fmt.Sprintf("10.0.0.%d:8000", k+1), CachedTokens: k * 100, PendingTokens: k * 1000, EstimatedTTFT: time.Duration(k) * time.Millisecond}
	}
	e.N = 4
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	runtime.LockOSThread() // threadCPU measures this goroutine alone
	defer runtime.UnlockOSThread()
	cpu0, thr0 := processCPU(), threadCPU()
	defer reportCPU(b, cpu0, thr0)
	for i := 0; i < b.N; i++ {
		st := newStream(srv, ctx) // as the request path makes one
		rc := &st.rec
		t0 := time.Now()
		rc.started(ctx, h, "POST", "/v1/chat/completions")
		rc.model("m")
		rc.traceTokenized(t0, openai.KindChat, p, r, nil)
		if rc.tr != nil {
			rc.tr.explain = e
		}
		rc.traceDecided(t0, r, dec, nil)
		rc.inject(&extprocv3.HeaderMutation{})
		rc.traceResponse(200, dec.Instance, dec.Instance)
		rc.traceFirstToken(time.Since(t0))
		rc.ended()
	}
}

// processCPU is the CPU time (user and system) the process has used: on a
// shared machine, wall time per operation mostly measures waiting for a
// core, while CPU time per operation is the cost, the exporter's
// goroutines included.
func processCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// threadCPU is the CPU time of the calling thread (the benchmark's loop,
// locked to it): the request path's own cost, without the exporter's.
func threadCPU() time.Duration { return rusage(1) } // RUSAGE_THREAD (Linux)

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, cpu0, thr0 time.Duration) {
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/op")
	b.ReportMetric(float64((threadCPU()-thr0).Nanoseconds())/float64(b.N)/1e3, "path-cpu-µs/op")
}
