package extproc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/dualmap/dualmap/internal/config"
)

func TestChatIsPinnedToAPair(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	hr := c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json",
		"x-gateway-destination-endpoint", "6.6.6.6:80")
	removed := hr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders()
	if len(removed) != 1 || removed[0] != "x-gateway-destination-endpoint" {
		t.Errorf("headers phase removes %v, want the client's destination header", removed)
	}
	br := c.body(t, chat("llama", "hello", true))
	m := br.GetRequestBody().GetResponse().GetHeaderMutation()
	dest := setHeader(m, "x-gateway-destination-endpoint")
	parts := strings.Split(dest, ",")
	if len(parts) != 2 || parts[0] == parts[1] || !strings.HasPrefix(parts[0], "10.0.0.") || !strings.HasPrefix(parts[1], "10.0.0.") {
		t.Fatalf("destination = %q, want primary,fallback among the instances", dest)
	}
	md := br.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if md != dest {
		t.Errorf("envoy.lb metadata = %q, want %q", md, dest)
	}
	// Same prefix, same primary.
	c2 := ts.open(t)
	defer c2.close()
	br2 := ts.post(t, c2, "/v1/chat/completions", chat("llama", "hello", true))
	if got := setHeader(br2.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"); strings.Split(got, ",")[0] != parts[0] {
		t.Errorf("second request to %q, want primary %q (cache affinity)", got, parts[0])
	}
	// Response headers carry the debug headers.
	rr := c.responseHeaders(t, "200")
	rm := rr.GetResponseHeaders().GetResponse().GetHeaderMutation()
	if setHeader(rm, "x-dualmap-instance") != parts[0] || setHeader(rm, "x-dualmap-reason") == "" {
		t.Errorf("debug headers = %v", rm.GetSetHeaders())
	}
}

func TestOtherKinds(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	tests := []struct {
		name, path, body string
	}{
		{"completions", "/v1/completions", `{"model":"m","prompt":"Once upon a time"}`},
		{"completions list", "/v1/completions", `{"model":"m","prompt":["a","b"]}`},
		{"responses", "/v1/responses", `{"model":"m","input":"Tell me a story","instructions":"be brief"}`},
		{"responses items", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
		{"unparsed post", "/v1/embeddings", `{"model":"m","input":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			defer c.close()
			r := ts.post(t, c, tt.path, tt.body)
			if dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"); !strings.HasPrefix(dest, "10.0.0.") {
				t.Errorf("destination = %q (response %T), want an instance", dest, r.Response)
			}
		})
	}
	// GET /v1/models: no body, pinned in the headers phase.
	c := ts.open(t)
	defer c.close()
	r := c.headers(t, true, ":method", "GET", ":path", "/v1/models")
	if dest := setHeader(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"); !strings.HasPrefix(dest, "10.0.0.") {
		t.Errorf("GET /v1/models destination = %q, want an instance", dest)
	}
}

func TestBadInput(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 70000) + `"}]}`
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
	}{
		{"invalid json", "application/json", `{"model":`, 400},
		{"not an object", "application/json", `[1,2]`, 400},
		{"wrong type", "application/json", `{"model":"m","messages":"hi"}`, 400},
		{"missing messages", "application/json", `{"model":"m"}`, 400},
		{"empty messages", "application/json", `{"model":"m","messages":[]}`, 400},
		{"content number", "application/json", `{"model":"m","messages":[{"role":"user","content":5}]}`, 400},
		{"invalid utf8", "application/json", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400},
		{"empty body", "application/json", ``, 400},
		{"too large", "application/json", big, 413},
		{"content type", "text/plain", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			defer c.close()
			c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", tt.contentType)
			r := c.body(t, tt.body)
			im := r.GetImmediateResponse()
			if im == nil || int(im.Status.Code) != tt.status {
				t.Fatalf("response = %v, want immediate %d", r, tt.status)
			}
			e := errorBody(t, im)
			if e["message"] == "" || e["type"] == nil {
				t.Errorf("error body %v lacks message or type", e)
			}
			if setHeader(im.Headers, "content-type") != "application/json" {
				t.Errorf("content-type = %q", setHeader(im.Headers, "content-type"))
			}
		})
	}
}

func TestUnknownModelWithoutDefaultPool(t *testing.T) {
	ts := start(t, parseConfig(t, `
pools:
  - name: llama
    models: [llama-3]
    instances: [{address: 10.0.0.1:8000}]
`), false)
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("gpt-9", "hi", false))
	if im := r.GetImmediateResponse(); im == nil || im.Status.Code != 404 || errorBody(t, im)["code"] != "model_not_found" {
		t.Fatalf("response = %v, want 404 model_not_found", r)
	}
	c2 := ts.open(t)
	defer c2.close()
	if r := ts.post(t, c2, "/v1/chat/completions", chat("llama-3", "hi", false)); setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") != "10.0.0.1:8000" {
		t.Errorf("llama-3 not routed to its pool: %v", r)
	}
}

// The single-endpoint mode (original-dst) pins one address, in the header
// and in the envoy.lb metadata alike.
func TestOriginalDstSingleAddress(t *testing.T) {
	cfg := parseConfig(t, fourInstances)
	cfg.Routing.Mode = config.ModeOriginalDst
	ts := start(t, cfg, false)
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false))
	dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
	md := r.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if strings.Contains(dest, ",") || !strings.HasPrefix(dest, "10.0.0.") || md != dest {
		t.Errorf("original-dst destination = %q, envoy.lb metadata %q; want one address in both", dest, md)
	}
}

func TestSLOHeaderAndSession(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	// Refused in the headers phase (controls_test.go), before the body.
	r := c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json", "x-dualmap-slo", "soon")
	if im := r.GetImmediateResponse(); im == nil || im.Status.Code != 400 {
		t.Fatalf("bad SLO header: %v, want 400", r)
	}
	var first string
	for i := 0; i < 8; i++ {
		c := ts.open(t)
		r := ts.post(t, c, "/v1/chat/completions", chat("m", strings.Repeat("q", i*100+1), false), "x-session-id", "abc", "x-dualmap-slo", "interactive")
		dest := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
		c.responseHeaders(t, "200")
		c.close()
		if first == "" {
			first = dest
		} else if dest != first {
			t.Fatalf("session request %d went to %s, want %s", i, dest, first)
		}
	}
}

func TestNoHealthyInstance(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	for _, p := range ts.srv.pools.Pools() {
		for _, id := range p.Addresses() {
			p.SetHealthy(id, false)
		}
	}
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false))
	im := r.GetImmediateResponse()
	if im == nil || im.Status.Code != 503 || setHeader(im.Headers, "retry-after") == "" {
		t.Fatalf("response = %v, want 503 with Retry-After", r)
	}
	if err := ts.srv.Ready(); err == nil {
		t.Error("Ready() = nil with no healthy instance")
	}
}

func TestUpstreamFailureTakesInstanceOut(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false))
	dest := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]
	c.responseHeaders(t, "503")
	c.close()
	for _, st := range ts.srv.pools.Pools()[0].Instances() {
		if st.ID == dest && st.Healthy {
			t.Fatalf("%s still healthy after a 503", dest)
		}
		if st.Running != 0 || st.PendingTokens != 0 {
			t.Errorf("%s holds load after the request ended: %+v", st.ID, st)
		}
	}
	for i := 0; i < 10; i++ {
		c := ts.open(t)
		r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false))
		if got := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")[0]; got == dest {
			t.Fatalf("routed to %s, which failed", got)
		}
		c.close()
	}
}

// A request over the queue budget waits in the router until load is
// released, then goes out; one that waits too long gets 429.
func TestQueueingAndTimeout(t *testing.T) {
	engine := healthyInstance(t)
	cfg := parseConfig(t, `
pools:
  - instances: [{address: `+engine+`}]
limits:
  queue_budget_tokens: 10
  max_queue_wait: 300ms
`)
	ts := start(t, cfg, true)
	first := ts.open(t)
	ts.post(t, first, "/v1/chat/completions", chat("m", "first", true))

	second := ts.open(t)
	second.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
	if err := second.stream.Send(bodyReq(chat("m", "second", true))); err != nil {
		t.Fatal(err)
	}
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
	first.responseHeaders(t, "200")
	// The first chunk of the streamed response body is the first token:
	// the prefill is done and the budget is free.
	first.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte("data: {}\n\n")}}})
	select {
	case r := <-got:
		if setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
			t.Fatalf("second request answered %v, want dispatched", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("second request never dispatched after the first's first token")
	}
	first.close()
	second.close()

	// Now hold the budget and let a third wait past max_queue_wait.
	hold := ts.open(t)
	ts.post(t, hold, "/v1/chat/completions", chat("m", "hold", true))
	late := ts.open(t)
	r := ts.post(t, late, "/v1/chat/completions", chat("m", "late", true))
	im := r.GetImmediateResponse()
	if im == nil || im.Status.Code != 429 || setHeader(im.Headers, "retry-after") == "" {
		t.Fatalf("late response = %v, want 429 with Retry-After", r)
	}
	hold.close()
	late.close()
}

// healthyInstance is a loopback HTTP server answering the health check.
func healthyInstance(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func bodyReq(b string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}}}
}

// Active health checks take out an instance that stops answering and bring
// it back when it answers again.
func TestActiveHealthChecks(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(500)
		}
	}))
	defer flaky.Close()
	good := healthyInstance(t)
	addr := strings.TrimPrefix(flaky.URL, "http://")
	cfg := parseConfig(t, `
pools:
  - instances: [{address: `+addr+`}, {address: `+good+`}]
health: {interval: 20ms, timeout: 200ms, backoff: 50ms}
`)
	ts := start(t, cfg, true)
	healthy := func() bool {
		for _, st := range ts.srv.pools.Pools()[0].Instances() {
			if st.ID == addr {
				return st.Healthy
			}
		}
		return false
	}
	waitFor(t, "flaky instance healthy", func() bool { return healthy() })
	up.Store(false)
	waitFor(t, "flaky instance out", func() bool { return !healthy() })
	up.Store(true)
	waitFor(t, "flaky instance back", func() bool { return healthy() })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A pool from DNS: the name's addresses become instances, and requests are
// pinned to them.
func TestDNSPool(t *testing.T) {
	engine := healthyInstance(t)
	_, port, _ := strings.Cut(engine, ":")
	cfg := parseConfig(t, `
pools:
  - dns: {name: localhost, port: `+port+`, interval: 1s}
health: {interval: 50ms}
`)
	ts := start(t, cfg, true)
	waitFor(t, "instances resolved from localhost", func() bool {
		for _, st := range ts.srv.pools.Pools()[0].Instances() {
			if st.ID == "127.0.0.1:"+port && st.Healthy {
				return true
			}
		}
		return false
	})
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", false))
	dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
	if !strings.Contains(dest, ":"+port) {
		t.Errorf("destination = %q, want an address from DNS with port %s", dest, port)
	}
}

// When Envoy says the fallback served (the primary was unreachable), the
// primary is taken out, and the header does not reach the client.
func TestFallbackServedMarksPrimaryDown(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "hi", true))
	parts := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")
	if len(parts) != 2 {
		t.Fatalf("destination %v, want primary,fallback", parts)
	}
	rr := c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", "200", "x-dualmap-upstream-host", parts[1])}}})
	removed := rr.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders()
	if len(removed) != 1 || removed[0] != "x-dualmap-upstream-host" {
		t.Errorf("response headers remove %v, want x-dualmap-upstream-host", removed)
	}
	for _, st := range ts.srv.pools.Pools()[0].Instances() {
		if st.ID == parts[0] && st.Healthy {
			t.Errorf("primary %s still healthy after Envoy fell back to %s", parts[0], parts[1])
		}
		if st.ID == parts[1] && !st.Healthy {
			t.Errorf("fallback %s marked down", parts[1])
		}
	}
}

// With response_body: none, the response headers of a stream stand for its
// first token.
func TestResponseBodyNoneUsesHeaders(t *testing.T) {
	cfg := parseConfig(t, fourInstances+"\n")
	cfg.Routing.ResponseBody = "none"
	ts := start(t, cfg, false)
	c := ts.open(t)
	defer c.close()
	ts.post(t, c, "/v1/chat/completions", chat("m", "hi", true))
	c.responseHeaders(t, "200")
	for _, st := range ts.srv.pools.Pools()[0].Instances() {
		if st.PendingTokens != 0 {
			t.Errorf("%s still has %d pending prefill tokens after the stream's headers", st.ID, st.PendingTokens)
		}
	}
}
