package extproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/dualmap/dualmap/internal/config"
)

// benchChat is a chat of n messages whose total size is about size bytes.
func benchChat(n, size int, last string) string {
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("You are a careful assistant. ", size/(2*29))}}
	per := size / (2 * n)
	for i := 1; i < n; i++ {
		role := "user"
		if i%2 == 0 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("turn %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", per/27))})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": last})
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": msgs})
	return string(b)
}

// BenchmarkPreparePick measures the body phase's work for a 32 KB chat whose
// earlier messages are in the per-message token cache: parse, tokenize,
// hash blocks, route (decision), release. Reports p50/p99 per request.
func BenchmarkPreparePick(b *testing.B) {
	cfgYAML := fourInstances
	if f := os.Getenv("DUALMAP_BENCH_TOKENIZER"); f != "" {
		cfgYAML += "\n" // the pool below gets the tokenizer
		cfgYAML = strings.Replace(cfgYAML, "  - instances:", "  - tokenizer: "+f+"\n    instances:", 1)
	}
	srv, err := New(parseConfig(b, cfgYAML), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i] = []byte(benchChat(20, 32<<10, fmt.Sprintf("question %d?", i)))
	}
	st := newStream(srv, context.Background())
	st.method, st.path, st.contentType = "POST", "/v1/chat/completions", "application/json"
	for _, body := range bodies { // warm the message cache
		tk, err := routeBody(st, body)
		if err != nil {
			b.Fatal(err)
		}
		tk.Done()
	}
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(bodies[0])))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		tk, err := routeBody(st, bodies[i%len(bodies)])
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		tk.Done()
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkGRPC drives the ext_proc server over loopback gRPC like Envoy
// does (request headers, 2 KB chat body, response headers, end of stream),
// from 1 and 64 concurrent streams, with in-memory and Redis state, and
// reports requests/s and p50/p99 of the router's added latency (headers
// sent to body answer received).
func BenchmarkGRPC(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("memory/streams=%d", workers), func(b *testing.B) { benchGRPC(b, parseConfig(b, fourInstances), workers) })
		b.Run(fmt.Sprintf("redis/streams=%d", workers), func(b *testing.B) {
			addr := redisServer(b)
			cfg := parseConfig(b, fourInstances+fmt.Sprintf("state:\n  backend: redis\n  redis: {addrs: [%q]}\n", addr))
			benchGRPC(b, cfg, workers)
		})
	}
}

func benchGRPC(b *testing.B, cfg config.Config, workers int) {
	ts := start(b, cfg, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range ts.srv.pools.Pools() { // shared state running, without health checks
		go p.Store().Run(ctx, p.Coordinator())
	}
	body := benchChat(4, 2<<10, "hello")
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	next := make(chan int, workers)
	b.ResetTimer()
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for range next {
				c := ts.open(b)
				s := time.Now()
				c.headers(b, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
				r := c.body(b, body)
				mine = append(mine, time.Since(s))
				if r.GetRequestBody() == nil {
					b.Errorf("response %T", r.Response)
				}
				c.send(b, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
					ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", "200")}}})
				c.close()
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
