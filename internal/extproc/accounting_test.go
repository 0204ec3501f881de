package extproc

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// load is an instance's scheduler state as /debug/instances reports it.
type load struct {
	ID            string
	PendingTokens int
	Running       int
	Estimate      struct{ Prefill, Decode, Memory, Total float64 }
}

// loads returns the default pool's instances by id, as the admin endpoint
// shows them.
func (ts *testServer) loads(t *testing.T) map[string]load {
	t.Helper()
	rec := httptest.NewRecorder()
	ts.srv.AdminHandler(ts.reg).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/instances", nil))
	var pools map[string][]load
	if err := json.Unmarshal(rec.Body.Bytes(), &pools); err != nil {
		t.Fatalf("/debug/instances: %v in %s", err, rec.Body)
	}
	m := map[string]load{}
	for _, l := range pools["default"] {
		m[l.ID] = l
	}
	return m
}

// estimates is loads, for the estimate's terms.
func (ts *testServer) estimates(t *testing.T) map[string]load { return ts.loads(t) }

func (c *call) responseBody(t testing.TB, b string, eos bool) *extprocv3.ProcessingResponse {
	return c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}})
}

// What the stream tells the scheduler: a dispatched request holds its
// prompt as pending prefill until its first token (the response headers
// of a streaming request, or with response_body: streamed its first
// non-empty body chunk), and runs until it completes (an error status, a
// non-streaming answer's headers, the body's end, or the stream's end).
func TestStreamSettlesTheScheduler(t *testing.T) {
	type want struct{ pending, running bool }
	tests := []struct {
		name     string
		respBody string // routing.response_body
		stream   bool
		steps    []string // "headers 200", "chunk", "empty chunk", "end", "close"
		want     []want   // after each step
	}{
		{"none: streaming 200", "none", true, []string{"headers 200", "close"},
			[]want{{false, true}, {false, false}}},
		{"none: non-streaming 200", "none", false, []string{"headers 200"},
			[]want{{false, false}}},
		{"none: 503", "none", true, []string{"headers 503"},
			[]want{{false, false}}},
		{"none: client gone before the answer", "none", true, []string{"close"},
			[]want{{false, false}}},
		{"streamed: streaming", "streamed", true, []string{"headers 200", "empty chunk", "chunk", "chunk", "end"},
			[]want{{true, true}, {true, true}, {false, true}, {false, true}, {false, false}}},
		{"streamed: non-streaming", "streamed", false, []string{"headers 200", "chunk", "end"},
			[]want{{true, true}, {true, true}, {false, false}}},
		{"streamed: 500", "streamed", true, []string{"headers 500"},
			[]want{{false, false}}},
		{"streamed: client gone mid-answer", "streamed", true, []string{"headers 200", "chunk", "close"},
			[]want{{true, true}, {false, true}, {false, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(fourInstances, "routing:\n", "routing:\n  response_body: "+tt.respBody+"\n", 1)
			ts := start(t, parseConfig(t, y), false)
			c := ts.open(t)
			defer c.close()
			br := ts.post(t, c, "/v1/chat/completions", chat("m", "tell me about the sea", tt.stream))
			dest := setHeader(br.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
			id := strings.Split(dest, ",")[0]
			if l := ts.loads(t)[id]; l.PendingTokens <= 0 || l.Running != 1 {
				t.Fatalf("after dispatch to %s: pending %d, running %d, want the prompt pending and 1 running", id, l.PendingTokens, l.Running)
			}
			for i, step := range tt.steps {
				switch step {
				case "headers 200", "headers 500", "headers 503":
					c.responseHeaders(t, strings.TrimPrefix(step, "headers "))
				case "chunk":
					c.responseBody(t, `data: {"choices":[{"delta":{"content":"hi"}}]}`+"\n\n", false)
				case "empty chunk":
					c.responseBody(t, "", false)
				case "end":
					c.responseBody(t, "data: [DONE]\n\n", true)
				case "close":
					c.close()
					// The server settles when it sees the stream end; wait for it.
					eventuallyLoads(t, ts, id, tt.want[i].pending, tt.want[i].running)
				}
				l := ts.loads(t)[id]
				if (l.PendingTokens > 0) != tt.want[i].pending || (l.Running > 0) != tt.want[i].running || l.PendingTokens < 0 || l.Running < 0 {
					t.Errorf("after %q: pending %d, running %d, want pending %v, running %v", step, l.PendingTokens, l.Running, tt.want[i].pending, tt.want[i].running)
				}
			}
		})
	}
}

// eventuallyLoads waits up to 2 s for instance id to reach the wanted state.
func eventuallyLoads(t *testing.T, ts *testServer, id string, pending, running bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if l := ts.loads(t)[id]; (l.PendingTokens > 0) == pending && (l.Running > 0) == running {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
