package extproc

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Hostile clients against the bounds on the router's memory: each test
// ends with no stream, no buffered byte and no load left.

const (
	bufferedSeries = "dualmap_buffered_body_bytes{}"
	tooLargeSeries = "dualmap_errors_total{kind=too_large}"
)

func rejectedSeries(limit string) string {
	return "dualmap_limit_rejections_total{limit=" + limit + "}"
}

// boundsConfig is fourInstances with the given limits.
func boundsConfig(t *testing.T, limits string) *testServer {
	t.Helper()
	cfg := strings.Replace(fourInstances, "limits:\n  max_body_bytes: 65536\n", "limits: {"+limits+"}\n", 1)
	return start(t, parseConfig(t, cfg), false)
}

// assertReleased fails unless ts serves no stream, holds no body byte and
// no instance holds load.
func assertReleased(t *testing.T, ts *testServer) {
	t.Helper()
	waitFor(t, "streams ended", func() bool { return metricValues(t, ts)[streamsSeries] == 0 })
	if got := metricValues(t, ts)[bufferedSeries]; got != 0 {
		t.Errorf("%s = %g with no stream, want 0", bufferedSeries, got)
	}
	assertIdle(t, ts)
}

// chunk sends a request body chunk and returns the answer.
func (c *call) chunk(t *testing.T, b string, eos bool) *extprocv3.ProcessingResponse {
	t.Helper()
	return c.send(t, reqBodyMsg(b, eos))
}

// wantStatus fails unless r is an immediate response with the status and
// the OpenAI error code.
func wantStatus(t *testing.T, r *extprocv3.ProcessingResponse, code int, errCode string) {
	t.Helper()
	im := r.GetImmediateResponse()
	if im == nil || int(im.GetStatus().GetCode()) != code {
		t.Fatalf("answer = %v, want an immediate %d", r, code)
	}
	if got := errorBody(t, im)["code"]; got != errCode {
		t.Errorf("error code = %v, want %s", got, errCode)
	}
}

// (a) A stream that keeps sending body chunks after its 413: nothing of
// them is kept, and the stream ends at the first. The budget is one body:
// a chunk over the body limit is refused before it is counted or kept
// (else the budget would answer 429 first).
func TestChunksAfter413AreNotKept(t *testing.T) {
	ts := boundsConfig(t, "max_body_bytes: 65536, max_buffered_bytes: 65536")
	c := ts.open(t)
	defer c.cancel()
	c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
	piece := strings.Repeat("x", 16<<10)
	for i := 0; i < 4; i++ { // 64 KiB: at the limit, not over it
		if r := c.chunk(t, piece, false); r.GetRequestBody() == nil {
			t.Fatalf("chunk %d answered %v, want it taken", i, r)
		}
	}
	if got := metricValues(t, ts)[bufferedSeries]; got != 65536 {
		t.Errorf("%s = %g, want 65536", bufferedSeries, got)
	}
	wantStatus(t, c.chunk(t, "x", false), 413, "request_too_large")
	m := metricValues(t, ts)
	if m[bufferedSeries] != 0 || m[tooLargeSeries] != 1 || m[rejectedSeries(limitBody)] != 1 {
		t.Errorf("after the 413: %s = %g, %s = %g, %s = %g; want 0, 1, 1", bufferedSeries, m[bufferedSeries],
			tooLargeSeries, m[tooLargeSeries], rejectedSeries(limitBody), m[rejectedSeries(limitBody)])
	}
	// The hostile part: 64 MiB more, as fast as the stream takes it.
	big := strings.Repeat("y", 1<<20)
	var err error
	sent := 0
	for ; sent < 64 && err == nil; sent++ {
		err = c.stream.Send(reqBodyMsg(big, false))
		if got := metricValues(t, ts)[bufferedSeries]; got != 0 {
			t.Fatalf("%s = %g after the 413 and %d more chunks, want 0", bufferedSeries, got, sent+1)
		}
	}
	_, rerr := c.stream.Recv()
	if status.Code(rerr) != codes.FailedPrecondition {
		t.Errorf("stream ended with %v, want FailedPrecondition", rerr)
	}
	if err == nil {
		// Sends are buffered by the transport; the stream's end shows on the next ones.
		for i := 0; i < 8 && err == nil; i++ {
			err = c.stream.Send(reqBodyMsg(big, false))
		}
		if err == nil {
			t.Errorf("the stream still took chunks after it ended")
		}
	}
	assertReleased(t, ts)
}

// (b) Idle streams over limits.max_streams are turned away: those that send
// their request headers get 429, those that send nothing
// RESOURCE_EXHAUSTED; every one is counted, and once all are closed the
// server has no more goroutines than before.
func TestStreamsOverTheCapTurnedAway(t *testing.T) {
	const maxStreams, extra, silent = 20, 30, 5
	ts := boundsConfig(t, fmt.Sprintf("max_streams: %d", maxStreams))
	warm := ts.open(t) // the client connection's goroutines are there for good
	ts.post(t, warm, "/v1/chat/completions", chat("m", "warm up", false))
	warm.responseHeaders(t, "200")
	warm.close()
	waitFor(t, "warm-up stream ended", func() bool { return metricValues(t, ts)[streamsSeries] == 0 })
	baseline := runtime.NumGoroutine()

	var idle []*call
	defer func() {
		for _, c := range idle {
			c.cancel()
		}
	}()
	for i := 0; i < maxStreams; i++ {
		c := ts.open(t)
		idle = append(idle, c)
		if r := c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"); r.GetRequestHeaders() == nil {
			t.Fatalf("stream %d under the cap answered %v", i, r)
		}
	}
	for i := 0; i < extra; i++ {
		c := ts.open(t)
		idle = append(idle, c)
		r := c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
		wantStatus(t, r, 429, "too_many_streams")
		if setHeader(r.GetImmediateResponse().GetHeaders(), "retry-after") == "" {
			t.Errorf("429 without Retry-After")
		}
		if _, err := c.stream.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("turned-away stream %d: Recv() after the 429 = %v, want the stream ended", i, err)
		}
	}
	for i := 0; i < silent; i++ { // all at once: each waits turnAwayWait
		idle = append(idle, ts.open(t))
	}
	for i, c := range idle[maxStreams+extra:] {
		if _, err := c.stream.Recv(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("silent stream %d over the cap: Recv() = %v, want RESOURCE_EXHAUSTED", i, err)
		}
	}
	m := metricValues(t, ts)
	if m[streamsSeries] != maxStreams {
		t.Errorf("%s = %g, want %d", streamsSeries, m[streamsSeries], maxStreams)
	}
	if got := m[rejectedSeries(limitStreams)]; got != extra+silent {
		t.Errorf("%s = %g, want %d", rejectedSeries(limitStreams), got, extra+silent)
	}
	if got := m["dualmap_errors_total{kind=too_many_streams}"]; got != extra+silent {
		t.Errorf("too_many_streams errors = %g, want %d", got, extra+silent)
	}

	for _, c := range idle {
		c.cancel()
	}
	idle = nil
	assertReleased(t, ts)
	waitFor(t, fmt.Sprintf("goroutines back to %d (+3)", baseline), func() bool { return runtime.NumGoroutine() <= baseline+3 })
	// The slots are free again.
	c := ts.open(t)
	defer c.close()
	if r := ts.post(t, c, "/v1/chat/completions", chat("m", "after", false)); r.GetRequestBody() == nil {
		t.Fatalf("stream after the others closed answered %v, want it routed", r)
	}
}

// (c) Streams each under limits.max_body_bytes but together over
// limits.max_buffered_bytes: the one that would go over gets 429, and the
// budget comes back as bodies are routed and streams end.
func TestBufferedBytesBudget(t *testing.T) {
	ts := boundsConfig(t, "max_body_bytes: 65536, max_buffered_bytes: 131072")
	body := chat("m", strings.Repeat("z", 60000), false)
	head, tail := body[:60000], body[60000:]
	open := func() *call {
		c := ts.open(t)
		c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
		return c
	}
	a, b, late := open(), open(), open()
	defer a.cancel()
	defer b.cancel()
	defer late.cancel()
	for _, c := range []*call{a, b} {
		if r := c.chunk(t, head, false); r.GetRequestBody() == nil {
			t.Fatalf("chunk under the budget answered %v", r)
		}
	}
	if got := metricValues(t, ts)[bufferedSeries]; got != 120000 {
		t.Errorf("%s = %g, want 120000", bufferedSeries, got)
	}
	wantStatus(t, late.chunk(t, head, false), 429, "buffer_full")
	m := metricValues(t, ts)
	if m[bufferedSeries] != 120000 || m[rejectedSeries(limitBuffered)] != 1 || m["dualmap_errors_total{kind=buffer_full}"] != 1 {
		t.Errorf("after the 429: %s = %g, rejections = %g, errors = %g; want 120000, 1, 1", bufferedSeries,
			m[bufferedSeries], m[rejectedSeries(limitBuffered)], m["dualmap_errors_total{kind=buffer_full}"])
	}
	// a's body ends: routed, its bytes go back.
	if r := a.chunk(t, tail, true); setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Fatalf("a's body answered %v, want it routed", r)
	}
	if got := metricValues(t, ts)[bufferedSeries]; got != 60000 {
		t.Errorf("%s = %g after a was routed, want 60000", bufferedSeries, got)
	}
	again := open()
	defer again.cancel()
	if r := again.chunk(t, head, false); r.GetRequestBody() == nil {
		t.Fatalf("chunk under the released budget answered %v", r)
	}
	a.responseHeaders(t, "200")
	for _, c := range []*call{a, b, late, again} {
		c.close()
	}
	assertReleased(t, ts)
}

// (d) A body over limits.max_body_bytes gets 413 on a path the router does
// not parse, too, counted as too_large and not internal; under the limit
// such a body is pinned, and none of it is kept.
func TestBodyOverLimitOnAnyPath(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false) // max_body_bytes: 65536
	post := func(path string) *call {
		c := ts.open(t)
		c.headers(t, false, ":method", "POST", ":path", path, "content-type", "application/json")
		return c
	}
	tests := []struct {
		name, path string
		chunks     []int
	}{
		{"embeddings in one message", "/v1/embeddings", []int{70000}},
		{"embeddings in chunks", "/v1/embeddings", []int{30000, 30000, 30000}},
		{"prefixed chat path", "/openai/v1/chat/completions", []int{65537}},
		{"chat completions", "/v1/chat/completions", []int{40000, 40000}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := post(tt.path)
			defer c.close()
			for j, n := range tt.chunks {
				r := c.chunk(t, strings.Repeat("x", n), j == len(tt.chunks)-1)
				if j < len(tt.chunks)-1 {
					if r.GetRequestBody() == nil {
						t.Fatalf("chunk %d answered %v", j, r)
					}
					continue
				}
				wantStatus(t, r, 413, "request_too_large")
			}
			m := metricValues(t, ts)
			if m[tooLargeSeries] != float64(i+1) || m["dualmap_errors_total{kind=internal}"] != 0 {
				t.Errorf("too_large = %g, internal = %g; want %d, 0", m[tooLargeSeries], m["dualmap_errors_total{kind=internal}"], i+1)
			}
		})
	}
	c := post("/v1/embeddings")
	defer c.close()
	if r := c.chunk(t, strings.Repeat("x", 65000), false); r.GetRequestBody() == nil {
		t.Fatalf("chunk under the limit answered %v", r)
	}
	if got := metricValues(t, ts)[bufferedSeries]; got != 0 {
		t.Errorf("%s = %g for a body the router does not read, want 0", bufferedSeries, got)
	}
	if r := c.chunk(t, "x", true); setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Fatalf("body under the limit answered %v, want it pinned", r)
	}
	c.responseHeaders(t, "200")
	c.close()
	assertReleased(t, ts)
}

// A body whose content-length is over limits.max_body_bytes gets 413 with
// its request headers, before Envoy sends any of it; a content-length
// within the limit, or one that is no number, changes nothing.
func TestContentLengthOverLimit(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false) // max_body_bytes: 65536
	tests := []struct {
		name, path, length string
		want               int // 0: the headers are answered
	}{
		{"chat over", "/v1/chat/completions", "65537", 413},
		{"embeddings over", "/v1/embeddings", "1000000000000", 413},
		{"at the limit", "/v1/chat/completions", "65536", 0},
		{"not a number", "/v1/embeddings", "lots", 0},
		{"negative", "/v1/embeddings", "-5", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			defer c.close()
			r := c.headers(t, false, ":method", "POST", ":path", tt.path, "content-type", "application/json", "content-length", tt.length)
			if tt.want == 0 {
				if r.GetRequestHeaders() == nil {
					t.Fatalf("headers answered %v, want them taken", r)
				}
				return
			}
			wantStatus(t, r, tt.want, "request_too_large")
		})
	}
	if got := metricValues(t, ts)[rejectedSeries(limitBody)]; got != 2 {
		t.Errorf("%s = %g, want 2", rejectedSeries(limitBody), got)
	}
	assertReleased(t, ts)
}
