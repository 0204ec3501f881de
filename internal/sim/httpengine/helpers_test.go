package httpengine

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fast are options for quick tests: fifty times faster than the profile and
// short outputs.
func fast() Options { return Options{TimeScale: 50, OutputTokens: 8, Name: "test-engine"} }

// start runs a Server for opt behind an httptest server (through its
// refusing listener) and returns it with its base URL; cleanup stops both.
func start(t testing.TB, opt Options) (*Server, string) {
	t.Helper()
	s, err := New(opt)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Listener = s.Listener(hs.Listener)
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
	})
	return s, hs.URL
}

// answer is a finished HTTP exchange.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request with a JSON content type when body is not empty.
func do(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// decode unmarshals a JSON body into a generic map.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return m
}

// event is one server-sent event's data and when it was read.
type event struct {
	data string
	at   time.Time
}

// readEvents reads server-sent events until the body ends, checking the
// framing: every event is one "data: " line followed by a blank line.
func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line %q does not start with \"data: \"", line)
		}
		evs = append(evs, event{data, time.Now()})
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("SSE event %q not followed by a blank line", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading SSE: %v", err)
	}
	return evs
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// chatBody is a chat request body with one user message.
func chatBody(content string, extra string) string {
	b, _ := json.Marshal(content)
	return `{"model":"m","messages":[{"role":"user","content":` + string(b) + `}]` + extra + `}`
}

// mustRequest builds a server-side request with a JSON content type when
// body is not empty.
func mustRequest(t *testing.T, method, target, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}
