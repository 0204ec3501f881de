package extproc

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// chatOfSize returns a chat body of exactly n bytes.
func chatOfSize(t *testing.T, n int) string {
	t.Helper()
	b := chat("m", "", false)
	b = chat("m", strings.Repeat("x", n-len(b)), false)
	if len(b) != n {
		t.Fatalf("chat body of %d bytes, want %d", len(b), n)
	}
	return b
}

// A body of limits.max_body_bytes (65,536 here), sent in chunks, is routed;
// one byte more is refused with 413, whichever chunk crosses the limit.
func TestBodyLimitIsExact(t *testing.T) {
	const limit = 65536
	ts := start(t, parseConfig(t, fourInstances), false)
	tests := []struct {
		name   string
		size   int
		chunks int
		status int // 0: routed
	}{
		{"at the limit, one chunk", limit, 1, 0},
		{"at the limit, three chunks", limit, 3, 0},
		{"one byte over, one chunk", limit + 1, 1, 413},
		{"one byte over, three chunks", limit + 1, 3, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := chatOfSize(t, tt.size)
			c := ts.open(t)
			defer c.close()
			c.headers(t, false, ":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json")
			var r *extprocv3.ProcessingResponse
			step := (len(body) + tt.chunks - 1) / tt.chunks
			for i := 0; i < len(body); i += step {
				end := min(i+step, len(body))
				r = c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
					RequestBody: &extprocv3.HttpBody{Body: []byte(body[i:end]), EndOfStream: end == len(body)}}})
				if r.GetImmediateResponse() != nil {
					break
				}
			}
			if tt.status == 0 {
				if dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"); !strings.HasPrefix(dest, "10.0.0.") {
					t.Errorf("%d-byte body: response %v, want it routed", tt.size, r.Response)
				}
				return
			}
			if got := int(r.GetImmediateResponse().GetStatus().GetCode()); got != tt.status {
				t.Errorf("%d-byte body: status %d (response %T), want %d", tt.size, got, r.Response, tt.status)
			}
		})
	}
}

// Envoy sends header values in raw_value, but value is valid too: both are
// read.
func TestHeadersInValueOrRawValue(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	for _, raw := range []bool{true, false} {
		c := ts.open(t)
		m := &corev3.HeaderMap{}
		for _, kv := range [][2]string{{":method", "POST"}, {":path", "/v1/chat/completions"}, {"content-type", "application/json"}} {
			h := &corev3.HeaderValue{Key: kv[0], Value: kv[1]}
			if raw {
				h = &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])}
			}
			m.Headers = append(m.Headers, h)
		}
		c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: m}}})
		r := c.body(t, chat("m", "hello", false))
		m2 := r.GetRequestBody().GetResponse().GetHeaderMutation()
		if dest := setHeader(m2, "x-gateway-destination-endpoint"); !strings.Contains(dest, ",") {
			t.Errorf("raw_value=%v: destination %q (response %T), want a chat request pinned to a pair", raw, dest, r.Response)
		}
		c.close()
	}
}
