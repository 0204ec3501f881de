package extproc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// Requests carrying the configured session header share one candidate
// pair whatever their prompts; without it, different prompts spread over
// the pool. The prompts without a session are not the session's: those are
// cached on its pair, and the policy's reach would rightly follow them
// there.
func TestSessionHeaderKeysTheRoute(t *testing.T) {
	y := "pools:\n  - candidates: 2\n    instances:\n"
	for i := 1; i <= 8; i++ {
		y += fmt.Sprintf("      - address: 10.0.0.%d:8000\n", i)
	}
	y += "routing:\n  session_header: x-session-id\n"
	ts := start(t, parseConfig(t, y), false)
	primaries := func(session bool) map[string]bool {
		seen := map[string]bool{}
		for i := range 12 {
			c := ts.open(t)
			var extra []string
			n := 100 + i
			if session {
				extra, n = []string{"x-session-id", "conversation-7"}, i
			}
			b, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{
				{"role": "user", "content": fmt.Sprintf("Prompt number %d. ", n) + strings.Repeat("Tell me more. ", 400)}}})
			body := string(b)
			r := ts.post(t, c, "/v1/chat/completions", body, extra...)
			dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
			seen[strings.Split(dest, ",")[0]] = true
			c.close()
		}
		return seen
	}
	if got := primaries(true); len(got) > 2 {
		t.Errorf("12 prompts of one session went to %v, want one pair", got)
	}
	if got := primaries(false); len(got) <= 2 {
		t.Errorf("12 different prompts without a session went to %v, want them spread past a pair", got)
	}
}

// Retry-After is sent, in whole seconds (at least 1), only with the errors
// a retry can cure; a bad request has none.
func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		err  error
		in   time.Duration
		want string
	}{
		{"no endpoint, 1 s", scheduler.ErrNoEndpoint, time.Second, "1"},
		{"queue timeout, 2.6 s", scheduler.ErrQueueTimeout, 2600 * time.Millisecond, "3"},
		{"late, 200 ms rounds up to 1", scheduler.ErrLate, 200 * time.Millisecond, "1"},
		{"bad SLO", errBadSLO, time.Second, ""},
		{"tokenizer", pool.ErrTokenize, time.Second, ""},
		{"internal", fmt.Errorf("boom"), time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := immediate(classify(tt.err, tt.in)).GetImmediateResponse()
			if got := setHeader(r.GetHeaders(), "retry-after"); got != tt.want {
				t.Errorf("retry-after = %q, want %q", got, tt.want)
			}
		})
	}
	// Through the stream: a malformed body is a 400 without Retry-After.
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	defer c.close()
	im := ts.post(t, c, "/v1/chat/completions", `{"model":`).GetImmediateResponse()
	if im.GetStatus().GetCode() != 400 || setHeader(im.GetHeaders(), "retry-after") != "" {
		t.Errorf("malformed body: %v, want 400 without Retry-After", im)
	}
}
