package extproc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// duplexConfig is the protocol_config of a filter with full-duplex bodies
// both ways, as Gateway API Inference Extension gateways configure it.
var duplexConfig = &extprocv3.ProtocolConfiguration{
	RequestBodyMode:  filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
}

// duplexHeaders is the first message of a full-duplex stream.
func duplexHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	m := reqHeadersMsg(eos, kv...)
	m.ProtocolConfig = duplexConfig
	return m
}

var duplexPost = []string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"}

// push sends messages without waiting for answers, as Envoy does in full
// duplex.
func (c *call) push(t testing.TB, msgs ...*extprocv3.ProcessingRequest) {
	t.Helper()
	for _, m := range msgs {
		if err := c.stream.Send(m); err != nil {
			t.Fatalf("Send() error = %v", err)
		}
	}
}

func (c *call) recv(t testing.TB) *extprocv3.ProcessingResponse {
	t.Helper()
	r, err := c.stream.Recv()
	if err != nil {
		t.Fatalf("Recv() error = %v", err)
	}
	return r
}

// chunks splits b into pieces of the given sizes (the rest in the last).
func chunks(b string, sizes ...int) []string {
	var out []string
	for _, n := range sizes {
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// bodyMsgs are the request body chunks, the last with end of stream.
func bodyMsgs(parts []string, eos bool) []*extprocv3.ProcessingRequest {
	var out []*extprocv3.ProcessingRequest
	for i, p := range parts {
		out = append(out, reqBodyMsg(p, eos && i == len(parts)-1))
	}
	return out
}

// readEcho reads streamed request body chunks until one with end of
// stream (or, with trailers, n chunks) and returns their bytes.
func readEcho(t *testing.T, c *call, want int) []byte {
	t.Helper()
	var got []byte
	for {
		r := c.recv(t)
		sb := r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sb == nil {
			t.Fatalf("echo answered %T (%v), want a streamed request body chunk", r.GetResponse(), r)
		}
		if len(sb.Body) > maxEchoChunk {
			t.Fatalf("echo chunk of %d bytes, want at most %d", len(sb.Body), maxEchoChunk)
		}
		got = append(got, sb.Body...)
		if sb.EndOfStream {
			if len(got) != want {
				t.Fatalf("echoed %d bytes before end of stream, want %d", len(got), want)
			}
			return got
		}
		if len(got) > want {
			t.Fatalf("echoed %d bytes, more than the %d sent", len(got), want)
		}
	}
}

// A full-duplex request: nothing is answered before the body ends; then
// the headers answer carries the pin (header and envoy.lb metadata alike)
// with clear_route_cache, the body comes back intact in chunks of at most
// 62,000 bytes, and the streamed response is echoed chunk by chunk while
// its first chunk and end release the request's load.
func TestFullDuplexRoundTrip(t *testing.T) {
	cfg := parseConfig(t, fourInstances)
	cfg.Limits.MaxBodyBytes = 1 << 20
	ts := start(t, cfg, false)
	for _, tt := range []struct {
		name  string
		sizes []int
		empty bool // an empty end-of-stream chunk after the body
		parts []string
	}{
		{"one chunk", nil, false, nil},
		{"uneven chunks", []int{1, 70000, 3}, false, nil},
		{"empty end-of-stream chunk", []int{100000}, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := chat("m", tt.name+strings.Repeat(" a long question", 12000), true) // ~190 KB, new to the cache
			tt.parts = chunks(body, tt.sizes...)
			if tt.empty {
				tt.parts = append(tt.parts, "")
			}
			c := ts.open(t)
			defer c.close()
			c.push(t, duplexHeaders(false, append(duplexPost, "x-gateway-destination-endpoint", "6.6.6.6:80")...))
			c.push(t, bodyMsgs(tt.parts, true)...)
			r := c.recv(t)
			hr := r.GetRequestHeaders().GetResponse()
			if hr == nil {
				t.Fatalf("first answer %T, want the request headers answer", r.GetResponse())
			}
			dest := setHeader(hr.GetHeaderMutation(), "x-gateway-destination-endpoint")
			if dest == "" || strings.Contains(dest, "6.6.6.6") {
				t.Fatalf("pin = %q, want a pool instance", dest)
			}
			if !hr.GetClearRouteCache() {
				t.Error("headers answer without clear_route_cache")
			}
			md := r.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
			if md != dest {
				t.Errorf("envoy.lb metadata = %q, header = %q; want them identical", md, dest)
			}
			if got := readEcho(t, c, len(body)); !bytes.Equal(got, []byte(body)) {
				t.Fatal("echoed body differs from the one sent")
			}
			// The server gives the body's bytes back once it has sent the
			// last echoed chunk, which the client may read first.
			waitFor(t, "the body's bytes given back after the echo", func() bool { return ts.srv.bounds.buffered.Load() == 0 })
			c.push(t, respHeadersMsg(false, ":status", "200"))
			if r := c.recv(t); r.GetResponseHeaders() == nil {
				t.Fatalf("response headers answered %T", r.GetResponse())
			}
			held := func() (n int) {
				for _, in := range ts.srv.pools.Pools()[0].Instances() {
					n += in.PendingTokens
				}
				return n
			}
			if held() == 0 {
				t.Fatal("no prefill pending before the first token")
			}
			for i, chunk := range []string{"data: {\"x\":1}\n\n", "data: [DONE]\n\n"} {
				eos := i == 1
				c.push(t, respBodyMsg(chunk, eos))
				sb := c.recv(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
				if sb == nil || string(sb.Body) != chunk || sb.EndOfStream != eos {
					t.Fatalf("response chunk %d echoed as %v, want %q (end %v)", i, sb, chunk, eos)
				}
				if i == 0 && held() != 0 {
					t.Error("prefill still pending after the first token")
				}
			}
			assertIdle(t, ts)
		})
	}
}

// A response chunk over 62,000 bytes is echoed in several.
func TestFullDuplexLargeResponseChunk(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	c.push(t, duplexHeaders(false, duplexPost...), reqBodyMsg(chat("m", "hi", false), true))
	c.recv(t)
	readEcho(t, c, len(chat("m", "hi", false)))
	c.push(t, respHeadersMsg(false, ":status", "200"))
	c.recv(t)
	big := strings.Repeat("x", 2*maxEchoChunk+5)
	c.push(t, respBodyMsg(big, true))
	var got []byte
	for n := 0; ; n++ {
		sb := c.recv(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sb == nil || len(sb.Body) > maxEchoChunk {
			t.Fatalf("chunk %d = %v", n, sb)
		}
		got = append(got, sb.Body...)
		if sb.EndOfStream {
			break
		}
	}
	if string(got) != big {
		t.Fatalf("echoed %d bytes, want the %d sent", len(got), len(big))
	}
	assertIdle(t, ts)
}

// Request trailers (SEND) end a full-duplex body: the request is routed,
// its body echoed without end of stream, and the trailers answered last.
func TestFullDuplexRequestTrailers(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	body := chat("m", "with trailers", false)
	c.push(t, duplexHeaders(false, duplexPost...))
	c.push(t, bodyMsgs(chunks(body, 10), false)...)
	c.push(t, reqTrailersMsg())
	if setHeader(c.recv(t).GetRequestHeaders().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Fatal("not pinned")
	}
	var got []byte
	for {
		r := c.recv(t)
		if r.GetRequestTrailers() != nil {
			break
		}
		sb := r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sb == nil || sb.EndOfStream {
			t.Fatalf("echo = %v, want chunks without end of stream, then the trailers answer", r)
		}
		got = append(got, sb.Body...)
	}
	if string(got) != body {
		t.Fatalf("echoed %q, want %q", got, body)
	}
	c.push(t, respHeadersMsg(true, ":status", "200"))
	c.recv(t)
	c.close()
	assertIdle(t, ts)
}

// A request with no body (GET) is pinned in the headers answer at once.
func TestFullDuplexNoBody(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	c.push(t, duplexHeaders(true, ":method", "GET", ":path", "/v1/models"))
	hr := c.recv(t).GetRequestHeaders().GetResponse()
	if setHeader(hr.GetHeaderMutation(), "x-gateway-destination-endpoint") == "" || !hr.GetClearRouteCache() {
		t.Fatalf("headers answer = %v, want the pin and clear_route_cache", hr)
	}
}

// A body the router does not parse (another path) is pinned and echoed too.
func TestFullDuplexOtherPath(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	c.push(t, duplexHeaders(false, ":method", "POST", ":path", "/v1/files", "content-type", "application/octet-stream"))
	c.push(t, bodyMsgs([]string{"abc", "def"}, true)...)
	if setHeader(c.recv(t).GetRequestHeaders().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
		t.Fatal("not pinned")
	}
	if got := readEcho(t, c, 6); string(got) != "abcdef" {
		t.Fatalf("echoed %q", got)
	}
}

// A declared content-length that disagrees with the body Envoy delivered
// is replaced by the delivered length.
func TestFullDuplexContentLength(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	body := chat("m", "hi", false)
	for _, tt := range []struct {
		declared, want string
	}{
		{fmt.Sprint(len(body)), ""},
		{fmt.Sprint(len(body) + 7), fmt.Sprint(len(body))},
		{"", ""},
	} {
		c := ts.open(t)
		kv := duplexPost
		if tt.declared != "" {
			kv = append(append([]string{}, duplexPost...), "content-length", tt.declared)
		}
		c.push(t, duplexHeaders(false, kv...), reqBodyMsg(body, true))
		m := c.recv(t).GetRequestHeaders().GetResponse().GetHeaderMutation()
		if got := setHeader(m, "content-length"); got != tt.want {
			t.Errorf("declared %q: content-length set to %q, want %q", tt.declared, got, tt.want)
		}
		readEcho(t, c, len(body))
		c.close()
	}
}

// In full duplex an error still replaces the request with an immediate
// response, since nothing was answered yet: bad JSON (400), a body over
// limits.max_body_bytes (413, at the chunk that crosses it), a body that is
// not JSON (415), no ready instance (503), and the body buffer full (429).
func TestFullDuplexErrors(t *testing.T) {
	big := strings.Repeat("x", 40000)
	unhealthy := func(ts *testServer) {
		for _, id := range ts.srv.pools.Pools()[0].Addresses() {
			ts.srv.pools.Pools()[0].SetHealthy(id, false)
		}
	}
	tests := []struct {
		name    string
		setup   func(ts *testServer)
		headers []string
		parts   []string
		status  int32
	}{
		{"bad json", nil, duplexPost, []string{`{"model":`, `"m",`}, 400},
		{"over max_body_bytes", nil, duplexPost, []string{big, big}, 413},
		{"declared over max_body_bytes", nil, append(append([]string{}, duplexPost...), "content-length", "999999"), nil, 413},
		{"not json", nil, []string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "text/plain"}, []string{chat("m", "hi", false)}, 415},
		{"buffer full", func(ts *testServer) { ts.srv.bounds.maxBuffered = 50000 }, duplexPost, []string{big, big[:20000]}, 429},
		{"no ready instance", unhealthy, duplexPost, []string{chat("m", "hi", false)}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := start(t, parseConfig(t, fourInstances), false)
			if tt.setup != nil {
				tt.setup(ts)
			}
			c := ts.open(t)
			defer c.close()
			c.push(t, duplexHeaders(false, tt.headers...))
			for i, p := range tt.parts {
				if err := c.stream.Send(reqBodyMsg(p, i == len(tt.parts)-1)); err != nil {
					break // the stream may have ended after the immediate response
				}
			}
			r := c.recv(t)
			im := r.GetImmediateResponse()
			if im == nil || int32(im.GetStatus().GetCode()) != tt.status {
				t.Fatalf("answer = %v, want an immediate %d", r, tt.status)
			}
			waitFor(t, "body bytes released", func() bool { return ts.srv.bounds.buffered.Load() == 0 })
			if tt.setup == nil {
				assertIdle(t, ts)
			}
		})
	}
}

// A full-duplex request that waits in the router queue gets its headers
// answer when it is dispatched; one that waits too long gets 429.
func TestFullDuplexQueue(t *testing.T) {
	engine := healthyInstance(t)
	ts := start(t, parseConfig(t, `
pools:
  - instances: [{address: `+engine+`}]
limits:
  queue_budget_tokens: 10
  max_queue_wait: 300ms
`), true)
	first := ts.open(t)
	defer first.close()
	first.push(t, duplexHeaders(false, duplexPost...), reqBodyMsg(chat("m", "first", true), true))
	first.recv(t)
	readEcho(t, first, len(chat("m", "first", true)))

	second := ts.open(t)
	defer second.close()
	second.push(t, duplexHeaders(false, duplexPost...), reqBodyMsg(chat("m", "second", true), true))
	got := make(chan *extprocv3.ProcessingResponse, 1)
	go func() {
		r, _ := second.stream.Recv()
		got <- r
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("second request answered while the first holds the budget: %v", r)
	default:
	}
	first.push(t, respHeadersMsg(false, ":status", "200"), respBodyMsg("data: {}\n\n", false))
	select {
	case r := <-got:
		if setHeader(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
			t.Fatalf("second request answered %v, want its pin", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("second request never dispatched after the first's first token")
	}
	readEcho(t, second, len(chat("m", "second", true)))

	late := ts.open(t)
	defer late.close()
	late.push(t, duplexHeaders(false, duplexPost...), reqBodyMsg(chat("m", "late", true), true))
	im := late.recv(t).GetImmediateResponse()
	if im == nil || im.Status.Code != 429 {
		t.Fatalf("late answer = %v, want 429", im)
	}
}

// The scheduler calls of full-duplex streams, streaming (SSE) and not:
// the first non-empty response chunk of a streaming answer is its first
// token, the body's end completes it; a plain answer completes at its end;
// a response body mode of NONE takes the headers as the first token and
// the stream's end as completion.
func TestFullDuplexStreamCalls(t *testing.T) {
	none := &extprocv3.ProtocolConfiguration{RequestBodyMode: duplexConfig.RequestBodyMode}
	tests := []struct {
		name  string
		pc    *extprocv3.ProtocolConfiguration
		body  string
		msgs  []*extprocv3.ProcessingRequest
		calls string
	}{
		{"SSE", duplexConfig, chat("m", "hi", true), []*extprocv3.ProcessingRequest{ok200, respBodyMsg("", false), respBodyMsg("data: {}\n\n", false), respBodyMsg("data: [DONE]\n\n", true)},
			"enqueue first_token complete"},
		{"SSE ended by trailers", duplexConfig, chat("m", "hi", true), []*extprocv3.ProcessingRequest{ok200, respBodyMsg("data: {}\n\n", false), respTrailersMsg()},
			"enqueue first_token complete"},
		{"non-streaming", duplexConfig, chat("m", "hi", false), []*extprocv3.ProcessingRequest{ok200, respBodyMsg(`{"choices":[]}`, true)},
			"enqueue complete"},
		{"response body NONE", none, chat("m", "hi", true), []*extprocv3.ProcessingRequest{ok200},
			"enqueue first_token complete"},
		{"503", duplexConfig, chat("m", "hi", true), []*extprocv3.ProcessingRequest{err503, respBodyMsg("oops", true)},
			"enqueue complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, f, _ := fakeStream(t, "none") // the announced modes win over routing.response_body
			h := reqHeadersMsg(false, duplexPost...)
			h.ProtocolConfig = tt.pc
			if r, err := st.handle(h); r != nil || err != nil {
				t.Fatalf("request headers answered %v, %v before the body", r, err)
			}
			r, err := st.handle(reqBodyMsg(tt.body, true))
			if err != nil || r.GetRequestHeaders() == nil {
				t.Fatalf("body end answered %v, %v; want the held headers answer", r, err)
			}
			drain(st)
			for _, m := range tt.msgs {
				r, err := st.handle(m)
				if err != nil || !answers(kindOf(m), r) {
					t.Fatalf("handle(%s) = %v, %v", kindOf(m), r, err)
				}
				if kindOf(m) == msgResponseBody && tt.pc == duplexConfig {
					if sb := r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse(); sb == nil || string(sb.Body) != string(m.GetResponseBody().GetBody()) {
						t.Fatalf("response chunk echoed as %v", r)
					}
				}
				drain(st)
			}
			st.finish()
			if got := strings.Join(f.calls, " "); got != tt.calls {
				t.Errorf("scheduler calls = %q, want %q", got, tt.calls)
			}
		})
	}
}

// drain takes what the stream owes after its last answer.
func drain(st *stream) {
	for st.next() != nil {
	}
}
