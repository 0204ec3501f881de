package extproc

import (
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Canned llama-server (llama.cpp) answers, shaped as its
// /v1/chat/completions writes them.
const (
	llamaChatBody = `{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"zx qu"}}],` +
		`"created":1764590000,"model":"dualmap-tiny","system_fingerprint":"b1-0c1e570","object":"chat.completion",` +
		`"usage":{"completion_tokens":4,"prompt_tokens":1927,"total_tokens":1931,"prompt_tokens_details":{"cached_tokens":1904}},` +
		`"id":"chatcmpl-x","timings":{"cache_n":1904,"prompt_n":23,"prompt_ms":6.1,"prompt_per_token_ms":0.26,"predicted_n":4,"predicted_ms":3.2}}`
	// The last chunk of a stream without stream_options.include_usage:
	// only timings.
	llamaStreamTail = `data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1764590000,"id":"chatcmpl-y",` +
		`"model":"dualmap-tiny","object":"chat.completion.chunk","timings":{"cache_n":512,"prompt_n":40,"prompt_ms":9.5}}` + "\n\ndata: [DONE]\n\n"
	// llama-server's answer to a prompt longer than a slot's context.
	llamaOverflowBody = `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":2048}}`
)

func TestUsageScan(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  int
		found bool
	}{
		{"llama.cpp chat: cached_tokens", llamaChatBody, 1904, true},
		{"llama.cpp stream: timings.cache_n only", `data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n" + llamaStreamTail, 512, true},
		{"vLLM: cached_tokens", `{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":0}}}`, 0, true},
		{"cached_tokens preferred over cache_n", `{"timings":{"cache_n":7},"usage":{"prompt_tokens_details":{"cached_tokens":3}}}`, 3, true},
		{"last value wins", `{"cached_tokens":5}{"cached_tokens":9}`, 9, true},
		{"spaces after the colon", `{"cached_tokens":  42 }`, 42, true},
		{"null", `{"prompt_tokens_details":{"cached_tokens":null}}`, 0, false},
		{"absurd length ignored", `{"cached_tokens":12345678901234}`, 0, false},
		{"negative ignored", `{"cached_tokens":-4}`, 0, false},
		{"quote restarts a match", `"cache"cached_tokens":8`, 8, true},
		{"none", `{"usage":{"prompt_tokens":10}}`, 0, false},
		{"an escaped key in generated text is not read", `{"content":"\"cache_n\":3"}`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every split into two chunks gives the same answer.
			for cut := 0; cut <= len(tt.body); cut++ {
				var u usageScan
				u.start("10.0.0.1:8000")
				u.feed([]byte(tt.body[:cut]))
				u.feed([]byte(tt.body[cut:]))
				u.feed([]byte(" ")) // a number at the very end ends here
				got, found := u.cached()
				if got != tt.want || found != tt.found {
					t.Fatalf("split at %d: cached() = %d, %v; want %d, %v", cut, got, found, tt.want, tt.found)
				}
			}
		})
	}
}

func TestUsageScanNotArmed(t *testing.T) {
	var u usageScan
	u.feed([]byte(llamaChatBody))
	if _, found := u.cached(); found {
		t.Error("a scan never started (no 2xx response) found a value")
	}
}

func TestUsageScanDoesNotAllocate(t *testing.T) {
	var u usageScan
	b := []byte(llamaChatBody)
	if n := testing.AllocsPerRun(100, func() { u.start("a"); u.feed(b) }); n != 0 {
		t.Errorf("feed allocates %v times per body", n)
	}
}

// A llama.cpp answer's cached tokens reach the per-instance series, beside
// what the router predicted for the same request.
func TestEngineReportedReuseMetrics(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			ts := start(t, parseConfig(t, fourInstances), false)
			var id string
			var predicted int
			for i := 0; i < 2; i++ { // the second time the prefix is predicted cached
				c := ts.open(t)
				ts.post(t, c, "/v1/chat/completions", chat("m", "tell me about the sea", stream))
				rh := c.responseHeaders(t, "200")
				hm := rh.GetResponseHeaders().GetResponse().GetHeaderMutation()
				id = setHeader(hm, "x-dualmap-instance")
				p, err := strconv.Atoi(setHeader(hm, "x-dualmap-cached-tokens"))
				if err != nil {
					t.Fatalf("x-dualmap-cached-tokens: %v", err)
				}
				predicted += p
				body := llamaChatBody
				if stream {
					body = llamaStreamTail
				}
				half := len(body) / 2
				c.responseBody(t, body[:half], false)
				c.responseBody(t, body[half:], true)
				c.close()
			}
			if predicted == 0 {
				t.Fatal("the router predicted no reuse for a repeated prompt")
			}
			want := 2 * 1904.0
			if stream {
				want = 2 * 512.0
			}
			m := ts.srv.m.usage
			waitFor(t, "usage reports", func() bool { return counterValue(m.reports.WithLabelValues("default", id)) == 2 })
			if got := counterValue(m.reported.WithLabelValues("default", id)); got != want {
				t.Errorf("engine cached tokens for %s = %v, want %v", id, got, want)
			}
			if got := counterValue(m.predicted.WithLabelValues("default", id)); got != float64(predicted) {
				t.Errorf("predicted cached tokens for %s = %v, want %v (the x-dualmap-cached-tokens headers)", id, got, predicted)
			}
			if got := counterValue(m.missed.WithLabelValues("default", id)); got != 0 {
				t.Errorf("predicted misses = %v, want 0", got)
			}
			// The engine reported at least what was predicted: no overclaim.
			if over, p := counterValue(m.over.WithLabelValues("default", id)), counterValue(m.predicted.WithLabelValues("default", id)); (over == 0) != (p <= want) {
				t.Errorf("overclaims = %v with %v predicted and %v reported", over, p, want)
			}
		})
	}
}

// An error answer reports nothing; a predicted prefix the engine did not
// have counts as a miss.
func TestEngineReportedMiss(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	var id string
	for i, body := range []string{llamaOverflowBody, `{"usage":{"prompt_tokens_details":{"cached_tokens":0}}}`} {
		status := "400"
		if i > 0 {
			status = "200"
		}
		c := ts.open(t)
		ts.post(t, c, "/v1/chat/completions", chat("m", "the same prompt", false))
		rh := c.responseHeaders(t, status)
		id = setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), "x-dualmap-instance")
		c.responseBody(t, body, true)
		c.close()
	}
	m := ts.srv.m.usage
	waitFor(t, "the usage report", func() bool { return counterValue(m.reports.WithLabelValues("default", id)) == 1 })
	if got := counterValue(m.missed.WithLabelValues("default", id)); got != 1 {
		t.Errorf("predicted misses = %v, want 1 (the second request was predicted cached, the engine reported 0)", got)
	}
	if got := counterValue(m.over.WithLabelValues("default", id)); got != 1 {
		t.Errorf("overclaims = %v, want 1", got)
	}
	if p, got := counterValue(m.predicted.WithLabelValues("default", id)), counterValue(m.overTok.WithLabelValues("default", id)); p == 0 || got != p {
		t.Errorf("overclaimed tokens = %v, want all %v predicted (the engine reported 0)", got, p)
	}
}

// A partial eviction: predicted 64 cached tokens, the engine reported 16.
func TestUsageOverclaimPartial(t *testing.T) {
	m := newUsageMetrics(nil)
	m.observe("p", "i", 64, 16)
	m.observe("p", "i", 16, 32)
	if got := counterValue(m.over.WithLabelValues("p", "i")); got != 1 {
		t.Errorf("overclaims = %v, want 1", got)
	}
	if got := counterValue(m.overTok.WithLabelValues("p", "i")); got != 48 {
		t.Errorf("overclaimed tokens = %v, want 48", got)
	}
	if got := counterValue(m.missed.WithLabelValues("p", "i")); got != 0 {
		t.Errorf("misses = %v, want 0 (the engine reported some)", got)
	}
}

// The engine's own errors: a client's bad request (llama.cpp's 400 for a
// context overflow) leaves the instance in; a 503 (llama-server loading its
// model) takes it out. The router never rewrites the engine's answer: the
// response headers pass with no status change and the body is not replaced.
func TestEngineErrorsAndHealth(t *testing.T) {
	for _, tt := range []struct {
		status string
		body   string
		down   bool
	}{
		{"400", llamaOverflowBody, false},
		{"404", `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, false},
		{"503", `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, true},
	} {
		t.Run(tt.status, func(t *testing.T) {
			ts := start(t, parseConfig(t, fourInstances), false)
			c := ts.open(t)
			ts.post(t, c, "/v1/chat/completions", chat("m", "far too long", false))
			rh := c.responseHeaders(t, tt.status)
			r := rh.GetResponseHeaders()
			if r == nil {
				t.Fatalf("response headers answered %T, want ResponseHeaders (pass through)", rh.Response)
			}
			hm := r.GetResponse().GetHeaderMutation()
			for _, h := range hm.GetSetHeaders() {
				if h.GetHeader().GetKey() == ":status" {
					t.Errorf("the router rewrote the engine's status to %s", h.GetHeader().GetRawValue())
				}
			}
			id := setHeader(hm, "x-dualmap-instance")
			rb := c.responseBody(t, tt.body, true)
			if b := rb.GetResponseBody(); b == nil || b.GetResponse().GetBodyMutation() != nil {
				t.Errorf("response body answered %v, want it passed on unchanged", rb)
			}
			c.close()
			p := ts.srv.pools.Pools()[0]
			down := p.HealthOf(id).Down
			if down != tt.down {
				t.Errorf("after the engine's %s, instance %s down = %v, want %v", tt.status, id, down, tt.down)
			}
			if got := metricValues(t, ts)["dualmap_upstream_errors_total{instance="+id+",pool=default}"]; (got > 0) != tt.down {
				t.Errorf("upstream errors counted for %s = %v after a %s", id, got, tt.status)
			}
		})
	}
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// When the fallback served (Envoy retried there), the engine's report is
// counted for the fallback with a prediction of 0 cached tokens (the
// router predicted reuse on the primary, not there), so a fallback that
// reports none is no predicted miss, and nothing is counted for the
// primary. Pins usageEnded's `instance == st.dec.Instance` (dropped, the
// primary's prediction is charged to the fallback and counted a miss).
func TestEngineUsageWhenFallbackServed(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	const prompt = "a prompt the primary caches"
	// The first request puts the prompt in the primary's KV index.
	c := ts.open(t)
	ts.post(t, c, "/v1/chat/completions", chat("m", prompt, false))
	c.responseHeaders(t, "200")
	c.close()
	// The second is predicted cached on the primary; Envoy says the
	// fallback served it, and the fallback reports no cached tokens.
	c = ts.open(t)
	defer c.close()
	r := ts.post(t, c, "/v1/chat/completions", chat("m", prompt, false))
	parts := strings.Split(setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"), ",")
	if len(parts) != 2 {
		t.Fatalf("destination %v, want primary,fallback", parts)
	}
	primary, fallback := parts[0], parts[1]
	rh := c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", "200", upstreamHostHeader, fallback)}}})
	hm := rh.GetResponseHeaders().GetResponse().GetHeaderMutation()
	if p, err := strconv.Atoi(setHeader(hm, "x-dualmap-cached-tokens")); err != nil || p == 0 {
		t.Fatalf("x-dualmap-cached-tokens = %q, want the primary's predicted reuse (> 0)", setHeader(hm, "x-dualmap-cached-tokens"))
	}
	c.responseBody(t, `{"usage":{"prompt_tokens_details":{"cached_tokens":0}}}`, true)
	m := ts.srv.m.usage
	waitFor(t, "the fallback's usage report", func() bool { return counterValue(m.reports.WithLabelValues("default", fallback)) == 1 })
	if got := counterValue(m.predicted.WithLabelValues("default", fallback)); got != 0 {
		t.Errorf("predicted cached tokens for the fallback %s = %v, want 0", fallback, got)
	}
	if got := counterValue(m.missed.WithLabelValues("default", fallback)); got != 0 {
		t.Errorf("predicted misses for the fallback %s = %v, want 0 (nothing was predicted there)", fallback, got)
	}
	for _, c := range []*prometheus.CounterVec{m.reports, m.predicted, m.missed} {
		if got := counterValue(c.WithLabelValues("default", primary)); got != 0 {
			t.Errorf("a usage series of the primary %s = %v after the fallback served, want 0", primary, got)
		}
	}
}
