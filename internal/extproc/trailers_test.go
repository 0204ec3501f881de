package extproc

import (
	"strings"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
)

// withBodyMode is the first message m of a stream whose filter announced
// the request body mode (protocol_config).
func withBodyMode(m *extprocv3.ProcessingRequest, mode filterv3.ProcessingMode_BodySendMode) *extprocv3.ProcessingRequest {
	m.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: mode, ResponseBodyMode: filterv3.ProcessingMode_STREAMED}
	return m
}

// A request body that ends with HTTP/2 trailers is routed, or refused with
// 400, in every request body mode; never answered without a pin (Envoy
// would then forward it with its own balancing). BUFFERED: Envoy sends
// the whole body in one message without end_of_stream and, with
// request_trailer_mode SEND, the trailers after the pin. STREAMED or no
// protocol_config: the chunks were answered, the trailers get 400.
func TestRequestTrailers(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	body := chat("m", "a body with trailers", false)
	post := []string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"}
	tests := []struct {
		name     string
		mode     filterv3.ProcessingMode_BodySendMode // 0: no protocol_config
		trailers bool                                 // request_trailer_mode SEND
		want     int                                  // 0: routed
	}{
		{"buffered, trailers skipped", filterv3.ProcessingMode_BUFFERED, false, 0},
		{"buffered, trailers sent", filterv3.ProcessingMode_BUFFERED, true, 0},
		{"buffered partial, trailers sent", filterv3.ProcessingMode_BUFFERED_PARTIAL, true, 0},
		{"streamed, trailers sent", filterv3.ProcessingMode_STREAMED, true, 400},
		{"not announced, trailers sent", 0, true, 400},
	}
	routed := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.open(t)
			defer c.close()
			first := reqHeadersMsg(false, post...)
			if tt.mode != 0 {
				first = withBodyMode(first, tt.mode)
			}
			if r := c.send(t, first); r.GetRequestHeaders() == nil {
				t.Fatalf("headers answered %v", r)
			}
			r := c.send(t, reqBodyMsg(body, false))
			if tt.want == 0 {
				if setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint") == "" {
					t.Fatalf("body without end_of_stream (%v) answered %v, want it routed", tt.mode, r)
				}
				routed++
				if tt.trailers {
					if r := c.send(t, reqTrailersMsg()); r.GetRequestTrailers() == nil {
						t.Fatalf("trailers after the pin answered %v, want a trailers answer", r)
					}
				}
				c.send(t, respHeadersMsg(false, ":status", "200"))
				c.send(t, respBodyMsg("{}", true))
			} else {
				if r.GetRequestBody() == nil || r.GetRequestBody().GetResponse().GetHeaderMutation() != nil {
					t.Fatalf("streamed chunk answered %v, want it taken", r)
				}
				wantStatus(t, c.send(t, reqTrailersMsg()), tt.want, "trailers_unsupported")
			}
		})
	}
	decisions := 0.0
	for k, v := range metricValues(t, ts) {
		if strings.HasPrefix(k, "dualmap_decisions_total{") {
			decisions += v
		}
	}
	if decisions != float64(routed) {
		t.Errorf("router decisions = %g, want %d (one per routed body)", decisions, routed)
	}
	assertIdle(t, ts)
	// A second set of trailers, or trailers of a body that ended with
	// end_of_stream, are out of phase.
	c := ts.open(t)
	defer c.close()
	c.send(t, withBodyMode(reqHeadersMsg(false, post...), filterv3.ProcessingMode_BUFFERED))
	c.send(t, reqBodyMsg(body, true))
	if code := c.endedWith(t, reqTrailersMsg()); code != codes.FailedPrecondition {
		t.Errorf("trailers after an end-of-stream body: stream ended with %v, want FailedPrecondition", code)
	}
}
