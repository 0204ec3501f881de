package extproc

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// A control header the router cannot read is refused in the headers
// phase: the request headers message is answered with the 400 itself,
// before any body chunk is sent (BUFFERED) or kept (full duplex), and the
// stream accepts no body after it.
func TestBadControlHeaderBeforeBody(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		errCode string
	}{
		{"slo", []string{"x-dualmap-slo", "soon"}, "bad_slo"},
		{"ttft ms", []string{"x-llm-d-slo-ttft-ms", "-5"}, "bad_slo"},
		{"priority", []string{"x-dualmap-priority", "high"}, "bad_priority"},
	}
	for _, duplex := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name
			if duplex {
				name += "/duplex"
			}
			t.Run(name, func(t *testing.T) {
				ts := start(t, parseConfig(t, fourInstances), false)
				st := newStream(ts.srv, metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-dualmap-client-priority", "any")))
				kv := append([]string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"}, tt.headers...)
				m := reqHeadersMsg(false, kv...)
				if duplex {
					m.ProtocolConfig = duplexConfig
				}
				resp, err := st.handle(m)
				if err != nil {
					t.Fatalf("handle(request_headers) = %v", err)
				}
				wantStatus(t, resp, 400, tt.errCode)
				if st.phase != phaseFailed {
					t.Errorf("phase after the 400 = %s, want failed", st.phase)
				}
				if _, err := st.handle(reqBodyMsg(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)); err == nil {
					t.Errorf("a body after the 400 was accepted")
				}
				if st.held != 0 || ts.srv.bounds.buffered.Load() != 0 {
					t.Errorf("body bytes held after the 400: stream %d, server %d", st.held, ts.srv.bounds.buffered.Load())
				}
				st.finish()
			})
		}
	}
}
