package extproc

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// tracedServer serves cfg with a tracer whose ended spans the recorder keeps.
func tracedServer(t *testing.T, cfg string) (*testServer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	return startWith(t, parseConfig(t, cfg), false, Options{Tracer: tp.Tracer("test")}), rec
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// tracedRequest sends a chat through a stream with the client's
// traceparent and a 200 response, and returns the body-phase mutation and
// the response-phase one.
func tracedRequest(t *testing.T, ts *testServer, user string) (pin, resp map[string]string) {
	c := ts.open(t)
	br := ts.post(t, c, "/v1/chat/completions", chat("llama", user, false),
		"traceparent", "00-"+clientTrace+"-"+clientSpan+"-01", "tracestate", "vendor=x", "baggage", "tenant=a")
	pin = map[string]string{}
	for _, h := range br.GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders() {
		pin[h.Header.Key] = string(h.Header.RawValue)
	}
	rh := c.responseHeaders(t, "200")
	resp = map[string]string{}
	for _, h := range rh.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		resp[h.Header.Key] = string(h.Header.RawValue)
	}
	c.close()
	return pin, resp
}

func TestTraceRouteSpan(t *testing.T) {
	ts, rec := tracedServer(t, fourInstances)
	prompt := strings.Repeat("a long shared prefix that spans many blocks of tokens. ", 40)
	pin, resp := tracedRequest(t, ts, prompt)
	routes := spansNamed(rec, spanRoute)
	if len(routes) != 1 {
		t.Fatalf("%d %s spans, want 1", len(routes), spanRoute)
	}
	sp := routes[0]
	if got := sp.SpanContext().TraceID().String(); got != clientTrace {
		t.Errorf("trace id %s, want the client's %s", got, clientTrace)
	}
	if got := sp.Parent().SpanID().String(); got != clientSpan {
		t.Errorf("parent span %s, want the client's %s", got, clientSpan)
	}
	// The upstream request carries the route span as its parent.
	want := "00-" + clientTrace + "-" + sp.SpanContext().SpanID().String() + "-01"
	if pin["traceparent"] != want {
		t.Errorf("injected traceparent %q, want %q", pin["traceparent"], want)
	}
	if pin["tracestate"] != "vendor=x" || pin["baggage"] != "tenant=a" {
		t.Errorf("injected tracestate %q baggage %q, want the client's", pin["tracestate"], pin["baggage"])
	}
	a := spanAttrs(sp)
	inst := resp["x-dualmap-instance"]
	checks := map[attribute.Key]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama", "dualmap.pool": "default",
		"dualmap.policy": "dualmap", "dualmap.instance": inst, "dualmap.served_instance": inst,
		"dualmap.reason": "tie_load", "dualmap.choice": "tie",
	}
	for k, v := range checks {
		if got := a[k].String(); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if a["gen_ai.usage.input_tokens"].AsInt64() < 100 || a["http.response.status_code"].AsInt64() != 200 {
		t.Errorf("input tokens %v, status %v", a["gen_ai.usage.input_tokens"].String(), a["http.response.status_code"].String())
	}
	cands := strings.Split(a["dualmap.candidates"].AsString(), ",")
	for _, k := range []attribute.Key{"dualmap.candidates.cached_tokens", "dualmap.candidates.pending_tokens", "dualmap.candidates.estimated_ttft_s", "dualmap.candidates.busy_extra_s"} {
		if n := len(strings.Split(a[k].AsString(), ",")); n != 4 {
			t.Errorf("%s = %q: %d figures, want one per candidate (4)", k, a[k].AsString(), n)
		}
	}
	if len(cands) != 4 {
		t.Errorf("candidates %v: want 4", cands)
	}
	found := false
	for _, c := range cands {
		found = found || c == inst
	}
	if !found {
		t.Errorf("chosen %s is not among the candidates %v", inst, cands)
	}
	tokenized := 0
	for _, ev := range sp.Events() {
		if ev.Name == eventTokenized {
			tokenized++
		}
	}
	if tokenized != 1 || a["dualmap.tokenize_s"].AsFloat64() <= 0 {
		t.Errorf("%d %s events, dualmap.tokenize_s %v; want one and a positive time", tokenized, eventTokenized, a["dualmap.tokenize_s"].String())
	}
	for _, kv := range sp.Attributes() {
		if strings.Contains(kv.Value.String(), "shared prefix") {
			t.Errorf("attribute %s carries prompt text", kv.Key)
		}
	}

	// The same prompt again: its prefix is cached where the first went.
	rec.Reset()
	_, resp = tracedRequest(t, ts, prompt)
	a = spanAttrs(spansNamed(rec, spanRoute)[0])
	if a["dualmap.reason"].String() != "cache" || a["dualmap.instance"].String() != inst || resp["x-dualmap-instance"] != inst {
		t.Errorf("repeat: reason %q instance %q, want cache on %s", a["dualmap.reason"].String(), a["dualmap.instance"].String(), inst)
	}
	if got := a["dualmap.predicted_cached_tokens"].AsInt64(); got < 100 || resp["x-dualmap-cached-tokens"] != a["dualmap.predicted_cached_tokens"].String() {
		t.Errorf("predicted cached tokens %d, debug header %q", got, resp["x-dualmap-cached-tokens"])
	}
}

func TestTraceRouterError(t *testing.T) {
	ts, rec := tracedServer(t, strings.Replace(fourInstances, "  - instances:", "  - models: [known]\n    instances:", 1))
	c := ts.open(t)
	br := ts.post(t, c, "/v1/chat/completions", chat("other", "hi", false), "traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	if br.GetImmediateResponse() == nil {
		t.Fatalf("want an immediate response for an unknown model, got %T", br.Response)
	}
	c.close()
	routes := spansNamed(rec, spanRoute)
	if len(routes) != 1 {
		t.Fatalf("%d route spans, want 1", len(routes))
	}
	a := spanAttrs(routes[0])
	if a["error.type"].String() != "model_not_found" || a["http.response.status_code"].AsInt64() != 404 {
		t.Errorf("error.type %q status %v", a["error.type"].String(), a["http.response.status_code"].String())
	}
}

func TestTraceOffInjectsNothing(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	pin, _ := tracedRequest(t, ts, "hello")
	if _, ok := pin["traceparent"]; ok || len(pin) != 1 {
		t.Errorf("tracing off: the pin sets %v, want only the destination header", pin)
	}
	if ts.srv.tracer != nil {
		t.Error("tracer set without Options.Tracer")
	}
}
