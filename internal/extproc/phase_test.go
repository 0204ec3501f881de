package extproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/scheduler"
)

// Messages as Envoy sends them.

func reqHeadersMsg(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func reqBodyMsg(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

func reqTrailersMsg() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{Trailers: hdrs("x-checksum", "1")}}}
}

func respHeadersMsg(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func respBodyMsg(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

func respTrailersMsg() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: hdrs("grpc-status", "0")}}}
}

var (
	postChat  = reqHeadersMsg(false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
	getModels = reqHeadersMsg(true, ":method", "GET", ":path", "/v1/models")
	chatBody  = reqBodyMsg(chat("m", "hello", true), true)
	badBody   = reqBodyMsg(`{"model":`, true)
	ok200     = respHeadersMsg(false, ":status", "200")
	err503    = respHeadersMsg(false, ":status", "503")
	unknown   = &extprocv3.ProcessingRequest{}
)

// answers reports whether resp is an answer to m: the matching kind, or an
// immediate response to a request message.
func answers(m message, resp *extprocv3.ProcessingResponse) bool {
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return m == msgRequestHeaders
	case *extprocv3.ProcessingResponse_RequestBody:
		return m == msgRequestBody
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return m == msgRequestTrailers
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return m == msgResponseHeaders
	case *extprocv3.ProcessingResponse_ResponseBody:
		return m == msgResponseBody
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return m == msgResponseTrailers
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return m == msgRequestHeaders || m == msgRequestBody
	}
	return false
}

// assertIdle fails unless every instance of ts's pools holds no load and
// is healthy.
func assertIdle(t *testing.T, ts *testServer) {
	t.Helper()
	for _, p := range ts.srv.pools {
		for _, st := range p.sched.Instances() {
			if st.Running != 0 || st.PendingTokens != 0 || st.QueuedTokens != 0 || st.Queued != 0 {
				t.Errorf("%s holds load after the stream ended: running %d, pending %d, queued %d (%d tokens)",
					st.ID, st.Running, st.PendingTokens, st.Queued, st.QueuedTokens)
			}
			if !st.Healthy {
				t.Errorf("%s taken out of service", st.ID)
			}
		}
	}
}

// metricValues flattens ts's metrics: series name and labels -> value
// (counters and gauges; histograms as their count and sum).
func metricValues(t *testing.T, ts *testServer) map[string]float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[key+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// changed lists the series whose values differ between two snapshots.
func changed(before, after map[string]float64) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, fmt.Sprintf("%s: %g -> %g", k, before[k], v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k+": gone")
		}
	}
	sort.Strings(out)
	return out
}

const violationSeries = "dualmap_errors_total{kind=protocol_violation}"

const streamsSeries = "dualmap_streams{}"

// endedWith sends req and returns the code the stream ended with (OK when
// the message was answered instead).
func (c *call) endedWith(t *testing.T, req *extprocv3.ProcessingRequest) codes.Code {
	t.Helper()
	if err := c.stream.Send(req); err != nil {
		t.Fatalf("Send() error = %v", err)
	}
	resp, err := c.stream.Recv()
	if err == nil {
		t.Errorf("message answered with %T, want the stream ended", resp.GetResponse())
		return codes.OK
	}
	return status.Code(err)
}

// Messages out of phase end the stream with a gRPC error and change
// nothing: the stream's request is released, no instance changes health, no
// metric moves but the protocol_violation count.
func TestPhaseViolations(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	tests := []struct {
		name   string
		before []*extprocv3.ProcessingRequest // answered
		msg    *extprocv3.ProcessingRequest   // refused
		code   codes.Code
	}{
		{"request headers twice", []*extprocv3.ProcessingRequest{postChat}, postChat, codes.FailedPrecondition},
		{"request headers after routing", []*extprocv3.ProcessingRequest{postChat, chatBody}, postChat, codes.FailedPrecondition},
		{"request headers after a GET", []*extprocv3.ProcessingRequest{getModels}, getModels, codes.FailedPrecondition},
		{"request body before headers", nil, chatBody, codes.FailedPrecondition},
		{"empty body after the end-of-stream body", []*extprocv3.ProcessingRequest{postChat, chatBody}, reqBodyMsg("", true), codes.FailedPrecondition},
		{"body after the end-of-stream body", []*extprocv3.ProcessingRequest{postChat, chatBody}, chatBody, codes.FailedPrecondition},
		{"chunk after the end-of-stream body", []*extprocv3.ProcessingRequest{postChat, chatBody}, reqBodyMsg(" ", false), codes.FailedPrecondition},
		{"request body of a GET", []*extprocv3.ProcessingRequest{getModels}, chatBody, codes.FailedPrecondition},
		{"request body in the response", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200}, reqBodyMsg("", true), codes.FailedPrecondition},
		{"request trailers before headers", nil, reqTrailersMsg(), codes.FailedPrecondition},
		{"request trailers after routing", []*extprocv3.ProcessingRequest{postChat, chatBody}, reqTrailersMsg(), codes.FailedPrecondition},
		{"request trailers in the response", []*extprocv3.ProcessingRequest{getModels, ok200}, reqTrailersMsg(), codes.FailedPrecondition},
		{"response headers first", nil, err503, codes.FailedPrecondition},
		{"response body before response headers", []*extprocv3.ProcessingRequest{postChat, chatBody}, respBodyMsg("data: {}\n\n", true), codes.FailedPrecondition},
		{"response body before dispatch", []*extprocv3.ProcessingRequest{postChat}, respBodyMsg("x", false), codes.FailedPrecondition},
		{"response trailers before response headers", []*extprocv3.ProcessingRequest{postChat, chatBody}, respTrailersMsg(), codes.FailedPrecondition},
		{"response trailers first", nil, respTrailersMsg(), codes.FailedPrecondition},
		{"response headers twice", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200}, err503, codes.FailedPrecondition},
		{"response body after its end", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200, respBodyMsg("data: {}\n\n", true)}, respBodyMsg("x", true), codes.FailedPrecondition},
		{"response trailers after the end", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200, respTrailersMsg()}, respTrailersMsg(), codes.FailedPrecondition},
		{"response headers after an immediate response", []*extprocv3.ProcessingRequest{postChat, badBody}, err503, codes.FailedPrecondition},
		{"request body after an immediate response", []*extprocv3.ProcessingRequest{postChat, badBody}, chatBody, codes.FailedPrecondition},
		{"unknown message first", nil, unknown, codes.InvalidArgument},
		{"unknown message after routing", []*extprocv3.ProcessingRequest{postChat, chatBody}, unknown, codes.InvalidArgument},
		{"unknown message in the response", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200}, unknown, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			defer c.cancel()
			for _, m := range tt.before {
				if r := c.send(t, m); !answers(kindOf(m), r) {
					t.Fatalf("%s answered with %T", kindOf(m), r.GetResponse())
				}
			}
			before := metricValues(t, ts)
			if got := c.endedWith(t, tt.msg); got != tt.code {
				t.Errorf("stream ended with %v, want %v", got, tt.code)
			}
			after := metricValues(t, ts)
			if after[violationSeries] != before[violationSeries]+1 {
				t.Errorf("%s = %g, want %g", violationSeries, after[violationSeries], before[violationSeries]+1)
			}
			delete(before, violationSeries)
			delete(after, violationSeries)
			// ... and once in dualmap_stream_errors_total, under the phase
			// that refused it.
			var grew float64
			for k := range after {
				if strings.HasPrefix(k, "dualmap_stream_errors_total") {
					grew += after[k] - before[k]
					delete(before, k)
					delete(after, k)
				}
			}
			if grew != 1 {
				t.Errorf("dualmap_stream_errors_total grew by %g, want 1", grew)
			}
			// The stream ended: it no longer counts.
			if after[streamsSeries] != 0 {
				t.Errorf("%s = %g after the stream ended, want 0", streamsSeries, after[streamsSeries])
			}
			delete(before, streamsSeries)
			delete(after, streamsSeries)
			if d := changed(before, after); len(d) > 0 {
				t.Errorf("the refused message changed metrics: %v", d)
			}
			assertIdle(t, ts)
		})
	}
}

// The issue: streams that each sent two end-of-stream bodies re-routed on
// the second and leaked the first request's load for good, until every
// later request waited out the queue and got 429. The second body is now
// refused and the first request released.
func TestSecondEndOfStreamBodyDoesNotLeak(t *testing.T) {
	var b strings.Builder
	b.WriteString("pools:\n  - instances:\n")
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, "      - address: %q\n", healthyInstance(t))
	}
	b.WriteString("limits: {queue_budget_tokens: 2000, max_queue_wait: 200ms}\n")
	ts := start(t, parseConfig(t, b.String()), true)
	waitFor(t, "instances healthy", func() bool { return ts.srv.Ready() == nil })

	const workers, perWorker = 8, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				errs <- twoBodies(ts, fmt.Sprintf("worker %d request %d", w, i), i%2 == 0)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	assertIdle(t, ts)
	for i := 0; i < 16; i++ {
		c := ts.open(t)
		r := ts.post(t, c, "/v1/chat/completions", chat("m", fmt.Sprintf("later %d", i), true))
		if im := r.GetImmediateResponse(); im != nil {
			t.Fatalf("later request %d answered %d: %s", i, im.GetStatus().GetCode(), im.GetBody())
		}
		if setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
			t.Fatalf("later request %d not routed: %v", i, r)
		}
		c.responseHeaders(t, "200")
		c.close()
	}
	assertIdle(t, ts)
}

// twoBodies routes a chat, then sends a second end-of-stream body (empty,
// or the same body again) and wants the stream ended with
// FailedPrecondition.
func twoBodies(ts *testServer, user string, empty bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := ts.client.Process(ctx)
	if err != nil {
		return err
	}
	second := chat("m", user, true)
	if empty {
		second = ""
	}
	for i, m := range []*extprocv3.ProcessingRequest{postChat, reqBodyMsg(chat("m", user, true), true), reqBodyMsg(second, true)} {
		if err := s.Send(m); err != nil {
			return fmt.Errorf("%s: send %d: %v", user, i, err)
		}
		r, err := s.Recv()
		switch {
		case i < 2 && err != nil:
			return fmt.Errorf("%s: message %d: %v", user, i, err)
		case i == 1 && r.GetRequestBody() == nil:
			return fmt.Errorf("%s: not routed: %v", user, r)
		case i == 2 && status.Code(err) != codes.FailedPrecondition:
			return fmt.Errorf("%s: second end-of-stream body answered %v, %v; want the stream ended with FailedPrecondition", user, r, err)
		}
	}
	return nil
}

// Sequences Envoy sends that hold no scheduler request are answered and
// change neither load nor health: a GET pinned by routeAny whose instance
// answers 503, and Envoy's own 413 or 503 before the body reached the
// router (trailers_test.go: bodies ended by request trailers).
func TestUnroutedResponsesChangeNothing(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	tests := []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
	}{
		{"GET answered 503", []*extprocv3.ProcessingRequest{getModels, err503, respBodyMsg("oops", true)}},
		{"GET answered 503 with trailers", []*extprocv3.ProcessingRequest{getModels, err503, respBodyMsg("oops", false), respTrailersMsg()}},
		{"Envoy's 413 before the body", []*extprocv3.ProcessingRequest{postChat, respHeadersMsg(false, ":status", "413"), respBodyMsg("Payload Too Large", true)}},
		{"Envoy's 503 after a chunk", []*extprocv3.ProcessingRequest{postChat, reqBodyMsg(`{"model":`, false), respHeadersMsg(true, ":status", "503")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			for _, m := range tt.msgs {
				if r := c.send(t, m); !answers(kindOf(m), r) || r.GetImmediateResponse() != nil {
					t.Fatalf("%s answered with %T", kindOf(m), r.GetResponse())
				}
			}
			c.close()
			assertIdle(t, ts)
		})
	}
}

// Trailers where Envoy sends them (trailer modes SEND) are answered, and a
// routed request's load is released when the stream ends.
func TestTrailersOfARoutedRequest(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	for _, m := range []*extprocv3.ProcessingRequest{postChat, chatBody, ok200, respBodyMsg("data: {}\n\n", false), respTrailersMsg()} {
		if r := c.send(t, m); !answers(kindOf(m), r) || r.GetImmediateResponse() != nil {
			t.Fatalf("%s answered with %T", kindOf(m), r.GetResponse())
		}
	}
	c.close()
	assertIdle(t, ts)
}

// Envoy's report of the endpoint that served is believed only for an
// instance of the pool: an address the router does not know takes no
// instance out, gets no series of its own, and is counted.
func TestUpstreamHostOfAStrangerIgnored(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", true))
	if setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Fatalf("not routed: %v", r)
	}
	rr := c.send(t, respHeadersMsg(false, ":status", "200", upstreamHostHeader, "6.6.6.6:80"))
	if removed := rr.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); len(removed) != 1 || removed[0] != upstreamHostHeader {
		t.Errorf("response headers remove %v, want %s", removed, upstreamHostHeader)
	}
	c.send(t, respBodyMsg("data: {}\n\n", true))
	assertIdle(t, ts)
	m := metricValues(t, ts)
	if got := m["dualmap_upstream_host_ignored_total{pool=default}"]; got != 1 {
		t.Errorf("dualmap_upstream_host_ignored_total = %g, want 1", got)
	}
	for k := range m {
		if strings.Contains(k, "6.6.6.6") {
			t.Errorf("series %s for an address that is no instance", k)
		}
	}
}

// fakeFlow dispatches every request at once to 10.0.0.1:8000 (fallback
// 10.0.0.2:8000) and records the calls.
type fakeFlow struct {
	calls []string
	held  map[*scheduler.Request]bool
}

func (f *fakeFlow) EnqueueAndWait(_ context.Context, r *scheduler.Request) (scheduler.Decision, error) {
	f.calls = append(f.calls, "enqueue")
	if f.held[r] {
		return scheduler.Decision{}, fmt.Errorf("%w: routed twice", scheduler.ErrBadRequest)
	}
	f.held[r] = true
	return scheduler.Decision{Instance: "10.0.0.1:8000", Fallback: "10.0.0.2:8000"}, nil
}

func (f *fakeFlow) FirstToken(r *scheduler.Request) {
	f.calls = append(f.calls, "first_token")
}

func (f *fakeFlow) Complete(r *scheduler.Request) {
	f.calls = append(f.calls, "complete")
	delete(f.held, r)
}

func (f *fakeFlow) AnyReadyOf(uint64, []string) (string, error) {
	f.calls = append(f.calls, "any")
	return "10.0.0.3:8000", nil
}

// healthSpy records health changes instead of making them.
type healthSpy struct {
	membership
	changes []string
}

func (h *healthSpy) SetHealthy(id string, ok bool) error {
	h.changes = append(h.changes, fmt.Sprintf("%s=%v", id, ok))
	return nil
}

var (
	_ flow       = (*fakeFlow)(nil)
	_ membership = (*healthSpy)(nil)
)

// fakeStream is a stream of a server whose pool has a fake scheduler and
// a health spy.
func fakeStream(t *testing.T, responseBody string) (*stream, *fakeFlow, *healthSpy) {
	t.Helper()
	cfg := parseConfig(t, fourInstances)
	cfg.Routing.ResponseBody = responseBody
	srv, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	f := &fakeFlow{held: map[*scheduler.Request]bool{}}
	h := &healthSpy{membership: srv.pools[0].members}
	srv.pools[0].flow, srv.pools[0].members = f, h
	return newStream(srv, context.Background()), f, h
}

// The stream's calls on its scheduler and its health code, message by
// message: routing at most once, progress reports in order, one release,
// and nothing from a refused message.
func TestStreamCalls(t *testing.T) {
	tests := []struct {
		name         string
		responseBody string
		msgs         []*extprocv3.ProcessingRequest
		refused      codes.Code // of the last message; OK: all answered
		calls        string     // the scheduler calls, after finish
		health       string
	}{
		{"streamed body", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200, respBodyMsg("", false), respBodyMsg("data: {}\n\n", false), respBodyMsg("", true)},
			codes.OK, "enqueue first_token complete", ""},
		{"body none", "none", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200}, codes.OK, "enqueue first_token complete", ""},
		{"5xx", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, err503}, codes.OK, "enqueue complete", "10.0.0.1:8000=false"},
		{"fallback served", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, respHeadersMsg(false, ":status", "200", upstreamHostHeader, "10.0.0.2:8000")},
			codes.OK, "enqueue complete", "10.0.0.1:8000=false"},
		{"stranger served", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, respHeadersMsg(false, ":status", "200", upstreamHostHeader, "6.6.6.6:80")},
			codes.OK, "enqueue complete", ""},
		{"stranger served a 503", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, respHeadersMsg(false, ":status", "503", upstreamHostHeader, "6.6.6.6:80")},
			codes.OK, "enqueue complete", "10.0.0.1:8000=false"},
		{"another member served a 503", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, respHeadersMsg(false, ":status", "503", upstreamHostHeader, "10.0.0.4:8000")},
			codes.OK, "enqueue complete", "10.0.0.1:8000=false 10.0.0.4:8000=false"},
		{"client gone before the response", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody}, codes.OK, "enqueue complete", ""},
		{"second end-of-stream body", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, reqBodyMsg("", true)}, codes.FailedPrecondition, "enqueue complete", ""},
		{"response headers twice", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, ok200, err503}, codes.FailedPrecondition, "enqueue complete", ""},
		{"response body before headers", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, respBodyMsg("data: {}\n\n", true)}, codes.FailedPrecondition, "enqueue complete", ""},
		{"unknown message", "streamed", []*extprocv3.ProcessingRequest{postChat, chatBody, unknown}, codes.InvalidArgument, "enqueue complete", ""},
		{"GET answered 503", "streamed", []*extprocv3.ProcessingRequest{getModels, err503, respBodyMsg("", true)}, codes.OK, "any", ""},
		{"response headers first", "streamed", []*extprocv3.ProcessingRequest{err503}, codes.FailedPrecondition, "", ""},
		{"immediate response, then 503", "streamed", []*extprocv3.ProcessingRequest{postChat, badBody, err503}, codes.FailedPrecondition, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, f, h := fakeStream(t, tt.responseBody)
			for i, m := range tt.msgs {
				resp, err := st.handle(m)
				last := i == len(tt.msgs)-1
				if last && tt.refused != codes.OK {
					var pe *protocolError
					if !errors.As(err, &pe) || pe.code() != tt.refused {
						t.Fatalf("handle(%s) = %v, %v; want a refusal with %v", kindOf(m), resp, err, tt.refused)
					}
					if st.phase != phaseFailed {
						t.Errorf("phase after a refusal = %s, want failed", st.phase)
					}
					continue
				}
				if err != nil || !answers(kindOf(m), resp) {
					t.Fatalf("handle(%s) = %T, %v; want an answer", kindOf(m), resp.GetResponse(), err)
				}
			}
			st.finish()
			st.finish() // a second call releases nothing more
			if got := strings.Join(f.calls, " "); got != tt.calls {
				t.Errorf("scheduler calls = %q, want %q", got, tt.calls)
			}
			if len(f.held) != 0 {
				t.Errorf("%d requests still held after finish", len(f.held))
			}
			if got := strings.Join(h.changes, " "); got != tt.health {
				t.Errorf("health changes = %q, want %q", got, tt.health)
			}
		})
	}
}

// countingFlow counts the requests a stream routes.
type countingFlow struct {
	flow
	routed, dispatched int
}

func (c *countingFlow) EnqueueAndWait(ctx context.Context, r *scheduler.Request) (scheduler.Decision, error) {
	c.routed++
	d, err := c.flow.EnqueueAndWait(ctx, r)
	if err == nil {
		c.dispatched++
	}
	return d, err
}

// fuzzMessage decodes one message from b: bits 0-2 its kind (0 and 7:
// none set), bit 3 its end-of-stream flag, bits 4-7 a variant of its
// content.
func fuzzMessage(b byte) *extprocv3.ProcessingRequest {
	eos, v := b&0x08 != 0, b>>4
	switch b & 0x07 {
	case 1:
		var m *extprocv3.ProcessingRequest
		switch v % 3 {
		case 0:
			m = reqHeadersMsg(eos, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
		case 1:
			m = reqHeadersMsg(eos, ":method", "GET", ":path", "/v1/models")
		default:
			m = reqHeadersMsg(eos, ":method", "POST", ":path", "/v1/embeddings", "content-type", "application/json")
		}
		// The gateway's subset hint: none, one member, empty, strangers.
		hints := []*structpb.Value{nil, structpb.NewStringValue("10.0.0.2:8000"), structpb.NewStringValue(""),
			structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("6.6.6.6:80")}})}
		if h := hints[(v/3)%4]; h != nil {
			m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				subsetNamespace: {Fields: map[string]*structpb.Value{subsetKey: h}}}}
		}
		return m
	case 2:
		return reqBodyMsg([]string{chat("m", "hi", true), chat("m", "hi", false), "", `{"model":`}[v%4], eos)
	case 3:
		return reqTrailersMsg()
	case 4:
		return respHeadersMsg(eos, ":status", []string{"200", "503", "404", "500"}[v%4],
			upstreamHostHeader, []string{"", "10.0.0.2:8000", "6.6.6.6:80", "10.0.0.1:8000"}[v/4])
	case 5:
		return respBodyMsg([]string{"", "data: {}\n\n"}[v%2], eos)
	case 6:
		return respTrailersMsg()
	}
	return &extprocv3.ProcessingRequest{}
}

// FuzzStreamSequence feeds one stream arbitrary sequences of messages
// against a real scheduler, with buffered and with full-duplex bodies
// (mode): it must never panic, answer every message it accepts with the
// matching kind (in full duplex: hold the request's answers until its body
// ends, then answer the headers and echo exactly the body it was sent),
// route at most once, refuse everything after an immediate response or a
// refusal, change health only for a request it dispatched, and leave no
// load and no reserved body bytes behind when it ends.
func FuzzStreamSequence(f *testing.F) {
	enc := func(msgs ...byte) []byte { return msgs }
	const (
		post, get, body, bodyEOS, trailers = 0x01, 0x19, 0x02, 0x0a, 0x03
		resp200, resp503, chunk, chunkEOS  = 0x04, 0x14, 0x15, 0x1d
		respTrailers, none                 = 0x06, 0x00
	)
	for _, seq := range [][]byte{
		enc(post, bodyEOS, resp200, chunk, chunkEOS),
		enc(post, body, bodyEOS, resp503, respTrailers),
		enc(post, bodyEOS, bodyEOS, resp200),
		enc(post, 0x3a, bodyEOS), // a body that does not parse, then another
		enc(get, resp503, chunkEOS),
		enc(get, bodyEOS),
		enc(post, resp200, chunkEOS),
		enc(post, body, trailers, resp200, respTrailers),
		enc(resp200, post, bodyEOS),
		enc(post, bodyEOS, none, resp200),
		enc(post, bodyEOS, 0x84, 0x94, chunkEOS), // served by a stranger, twice
		enc(post, body, body, trailers, resp200, chunk, chunkEOS),
		enc(post, 0x12, body, bodyEOS, resp200, chunkEOS), // a plain completion
		enc(0x21, body, bodyEOS, resp200, chunkEOS),       // another path
	} {
		for mode := byte(0); mode < 4; mode++ {
			f.Add(mode, seq)
		}
	}
	type fixture struct {
		srv    *Server
		flow   *countingFlow
		spy    *healthSpy
		duplex bool
	}
	var fixtures []fixture
	for _, mode := range []string{"streamed", "none", "streamed duplex", "none duplex"} {
		rb, duplex, _ := strings.Cut(mode, " ")
		cfg := parseConfig(f, fourInstances)
		cfg.Routing.ResponseBody = rb
		cfg.Limits.MaxBodyBytes = 4096 // so that chunks cross it
		srv, err := New(cfg, Options{})
		if err != nil {
			f.Fatal(err)
		}
		defer srv.Close()
		p := srv.pools[0]
		fx := fixture{srv: srv, flow: &countingFlow{flow: p.flow}, spy: &healthSpy{membership: p.members}, duplex: duplex != ""}
		p.flow, p.members = fx.flow, fx.spy
		fixtures = append(fixtures, fx)
	}
	f.Fuzz(func(t *testing.T, mode byte, seq []byte) {
		if len(seq) > 64 {
			seq = seq[:64]
		}
		fx := fixtures[int(mode)%len(fixtures)]
		p := fx.srv.pools[0]
		fx.flow.routed, fx.flow.dispatched, fx.spy.changes = 0, 0, nil
		p.mu.Lock()
		clear(p.health)
		p.mu.Unlock()
		st := newStream(fx.srv, context.Background())
		over := false   // an immediate response was sent, or a message refused
		var sent []byte // request body bytes accepted
		for i, b := range seq {
			m := fuzzMessage(b)
			if i == 0 && fx.duplex {
				m.ProtocolConfig = duplexConfig
			}
			before := st.phase
			resp, err := st.handle(m)
			if err != nil {
				var pe *protocolError
				if !errors.As(err, &pe) || resp != nil {
					t.Fatalf("handle(%s) = %v, %v; want no answer and a *protocolError", kindOf(m), resp, err)
				}
				over = true
				continue
			}
			if over {
				t.Fatalf("handle(%s) answered %T after the stream was over", kindOf(m), resp.GetResponse())
			}
			if kindOf(m) == msgRequestBody {
				sent = append(sent, m.GetRequestBody().GetBody()...)
			}
			if resp == nil {
				// Only a full-duplex request's headers and body chunks
				// wait for the body's end.
				if !fx.duplex || st.phase != phaseRequestBody || (kindOf(m) != msgRequestBody && kindOf(m) != msgRequestHeaders) {
					t.Fatalf("handle(%s) in phase %s sent no answer", kindOf(m), before)
				}
				continue
			}
			heldAnswer := fx.duplex && before == phaseRequestBody && resp.GetRequestHeaders() != nil
			// Trailers that end a body get an immediate answer: an error of
			// the routing in full duplex, 400 when it cannot be pinned.
			refusedAtEnd := kindOf(m) == msgRequestTrailers && resp.GetImmediateResponse() != nil
			if !answers(kindOf(m), resp) && !heldAnswer && !refusedAtEnd {
				t.Fatalf("handle(%s) answered %T", kindOf(m), resp.GetResponse())
			}
			over = resp.GetImmediateResponse() != nil
			var echoed []byte
			for r := st.next(); r != nil; r = st.next() {
				switch {
				case r.GetRequestBody() != nil && heldAnswer:
					sb := r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
					if sb == nil || len(sb.Body) > maxEchoChunk {
						t.Fatalf("echo chunk %v", r)
					}
					echoed = append(echoed, sb.Body...)
				case r.GetRequestTrailers() != nil && heldAnswer && kindOf(m) == msgRequestTrailers:
				case r.GetResponseBody() != nil && kindOf(m) == msgResponseBody && fx.duplex:
				default:
					t.Fatalf("handle(%s) followed by %T", kindOf(m), r.GetResponse())
				}
			}
			if heldAnswer && !bytes.Equal(echoed, sent) {
				t.Fatalf("echoed %q, want the body sent, %q", echoed, sent)
			}
			if fx.flow.routed > 1 {
				t.Fatalf("one stream routed %d times", fx.flow.routed)
			}
		}
		st.finish()
		if n := fx.srv.bounds.buffered.Load(); n != 0 {
			t.Fatalf("%d body bytes reserved after the stream ended", n)
		}
		if len(fx.spy.changes) > 0 && fx.flow.dispatched == 0 {
			t.Fatalf("health changed (%v) by a stream that dispatched nothing", fx.spy.changes)
		}
		for _, in := range p.sched.Instances() {
			if in.Running != 0 || in.PendingTokens != 0 || in.QueuedTokens != 0 || in.Queued != 0 {
				t.Fatalf("%s holds load after the stream ended: %+v", in.ID, in)
			}
		}
	})
}

// kindOf returns the kind of req, as the stream classifies it.
func kindOf(req *extprocv3.ProcessingRequest) message {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return msgRequestHeaders
	case *extprocv3.ProcessingRequest_RequestBody:
		return msgRequestBody
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return msgRequestTrailers
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return msgResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		return msgResponseBody
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return msgResponseTrailers
	}
	return msgUnknown
}
