package httpengine

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFaultDraws(t *testing.T) {
	draws := func(seed uint64, rate float64, n int) []bool {
		s := faultState{seed: seed, f: Faults{ErrorRate: rate}}
		out := make([]bool, n)
		for i := range out {
			out[i] = s.fail()
		}
		return out
	}
	count := func(v []bool) (n int) {
		for _, b := range v {
			if b {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name     string
		rate     float64
		min, max int // failures out of 1000
	}{
		{"never", 0, 0, 0},
		{"always", 1, 1000, 1000},
		{"half", 0.5, 450, 550},
		{"a tenth", 0.1, 70, 130},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := draws(7, tt.rate, 1000), draws(7, tt.rate, 1000)
			if n := count(a); n < tt.min || n > tt.max {
				t.Errorf("failures at rate %g = %d of 1000, want %d to %d", tt.rate, n, tt.min, tt.max)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("draw %d differs between two runs with the same seed", i)
				}
			}
		})
	}
	a, b := draws(1, 0.5, 64), draws(2, 0.5, 64)
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	if same == len(a) {
		t.Errorf("seeds 1 and 2 drew the same 64 failures")
	}
}

func TestErrorRate(t *testing.T) {
	opt := fast()
	opt.ErrorRate = 1
	s, url := start(t, opt)
	for range 3 {
		a := do(t, "POST", url+"/v1/completions", `{"model":"m","prompt":"x"}`)
		if a.status != http.StatusInternalServerError {
			t.Fatalf("POST with error rate 1 = %d, want 500", a.status)
		}
		if e, _ := decode(t, a.body)["error"].(map[string]any); e["type"] != "server_error" {
			t.Errorf("500 body = %s, want an OpenAI server_error", a.body)
		}
	}
	if got := s.Snapshot().Engine.Submitted; got != 0 {
		t.Errorf("engine saw %d requests, want 0: failed requests do not reach it", got)
	}
	// Parse errors still win: a bad body gets its 400 whatever the rate.
	if a := do(t, "POST", url+"/v1/completions", `{"model":"m"}`); a.status != http.StatusBadRequest {
		t.Errorf("bad body with error rate 1 = %d, want 400", a.status)
	}
}

func TestAdminFault(t *testing.T) {
	s, url := start(t, fast())
	tests := []struct {
		name       string
		body       string
		wantStatus int
		want       Faults
		health     int
		infer      int
	}{
		{"read", "", 200, Faults{}, 200, 200},
		{"down", `{"down":true}`, 200, Faults{Down: true}, 503, 200},
		{"errors, keeps down", `{"error_rate":1}`, 200, Faults{Down: true, ErrorRate: 1}, 503, 500},
		{"all back", `{"error_rate":0,"down":false,"added_latency_ms":0}`, 200, Faults{}, 200, 200},
		{"latency", `{"added_latency_ms":60}`, 200, Faults{AddedLatency: 60 * time.Millisecond}, 200, 200},
		{"bad rate", `{"error_rate":2}`, 400, Faults{AddedLatency: 60 * time.Millisecond}, 200, 200},
		{"negative latency", `{"added_latency_ms":-1}`, 400, Faults{AddedLatency: 60 * time.Millisecond}, 200, 200},
		{"unknown field", `{"explode":true}`, 400, Faults{AddedLatency: 60 * time.Millisecond}, 200, 200},
		{"not JSON", `{`, 400, Faults{AddedLatency: 60 * time.Millisecond}, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.body == "" {
				method = "GET"
			}
			a := do(t, method, url+"/admin/fault", tt.body)
			if a.status != tt.wantStatus {
				t.Fatalf("%s /admin/fault %s = %d %s, want %d", method, tt.body, a.status, a.body, tt.wantStatus)
			}
			if got := s.Faults(); got != tt.want {
				t.Errorf("Faults() = %+v, want %+v", got, tt.want)
			}
			begin := time.Now()
			if a := do(t, "GET", url+"/health", ""); a.status != tt.health {
				t.Errorf("GET /health = %d, want %d", a.status, tt.health)
			}
			if took := time.Since(begin); took < tt.want.AddedLatency {
				t.Errorf("GET /health took %v, want >= the added %v", took, tt.want.AddedLatency)
			}
			if a := do(t, "POST", url+"/v1/completions", `{"model":"m","prompt":"x","max_tokens":1}`); a.status != tt.infer {
				t.Errorf("POST /v1/completions = %d, want %d", a.status, tt.infer)
			}
		})
	}
}

func TestRefuseConnections(t *testing.T) {
	s, url := start(t, fast())
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	tests := []struct {
		name   string
		refuse bool
	}{
		{"serving", false},
		{"refusing", true},
		{"serving again", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.SetRefuse(tt.refuse)
			resp, err := client.Get(url + "/health")
			if err == nil {
				resp.Body.Close()
			}
			if failed := err != nil; failed != tt.refuse {
				t.Errorf("GET /health error = %v, want failure %v", err, tt.refuse)
			}
		})
	}
}

// rawConn is one client connection driven by hand, so a test knows which
// connection each request used.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c, bufio.NewReader(c)}
}

// send writes one request and reads the response head; the caller reads
// and closes the body.
func (c *rawConn) send(method, path, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, "http://engine"+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(c); err != nil {
		return nil, err
	}
	return http.ReadResponse(c.br, req)
}

// exchange sends one request and reads the whole response: its status, or
// an error if the connection failed before the response was complete.
func (c *rawConn) exchange(method, path, body string) (int, error) {
	resp, err := c.send(method, path, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

func TestRefuseInference(t *testing.T) {
	opt := fast()
	opt.TimeScale = 1 // a long generation stays in flight
	s, url := start(t, opt)
	addr := strings.TrimPrefix(url, "http://")
	const infer = `{"model":"m","prompt":"x","max_tokens":1}`

	health, used, streaming, admin := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	if code, err := health.exchange("GET", "/health", ""); code != 200 || err != nil {
		t.Fatalf("GET /health before the fault = %d, %v, want 200", code, err)
	}
	if code, err := used.exchange("POST", "/v1/completions", infer); code != 200 || err != nil {
		t.Fatalf("POST /v1/completions before the fault = %d, %v, want 200", code, err)
	}
	// 100 tokens (ignore_eos) at the profile's speed take seconds: the
	// stream is still going when the fault starts.
	resp, err := streaming.send("POST", "/v1/completions", `{"model":"m","prompt":"x","max_tokens":100,"ignore_eos":true,"stream":true}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("streaming request before the fault = %v, %v, want 200", resp, err)
	}
	defer resp.Body.Close()

	a := do(t, "POST", url+"/admin/fault", `{"refuse_inference":true}`)
	if a.status != 200 || !s.Faults().RefuseInference {
		t.Fatalf("POST /admin/fault refuse_inference = %d %s, Faults() = %+v, want 200 and the fault on", a.status, a.body, s.Faults())
	}
	if !strings.Contains(string(a.body), `"refuse_inference":true`) {
		t.Errorf("POST /admin/fault answered %s, want refuse_inference true", a.body)
	}

	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("dial during the fault succeeded, want connection refused")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial during the fault = %v, want connection refused", err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("the stream in flight at the fault ended cleanly, want its connection reset")
	}
	if code, err := used.exchange("POST", "/v1/completions", infer); err == nil {
		t.Errorf("POST /v1/completions on a connection that carried inference = %d, want the connection reset", code)
	}
	if code, err := health.exchange("GET", "/health", ""); code != 200 || err != nil {
		t.Errorf("GET /health on a connection open before the fault = %d, %v, want 200", code, err)
	}
	if code, err := health.exchange("POST", "/v1/completions", infer); err == nil {
		t.Errorf("POST /v1/completions on the health connection = %d, want the connection reset", code)
	}
	if got := s.Snapshot().Engine.Submitted; got != 2 {
		t.Errorf("engine saw %d requests, want 2: refused requests do not reach it", got)
	}

	// Lifted over a connection opened before the fault: it listens again.
	if err := s.SetFaults(Faults{RefuseInference: true, Down: true}); err != nil {
		t.Fatal(err)
	}
	if code, err := admin.exchange("POST", "/admin/fault", `{"refuse_inference":false}`); code != 200 || err != nil {
		t.Fatalf("lifting the fault = %d, %v, want 200", code, err)
	}
	if f := s.Faults(); f != (Faults{Down: true}) {
		t.Errorf("Faults() after lifting = %+v, want only Down left", f)
	}
	if a := do(t, "POST", url+"/v1/completions", infer); a.status != 200 {
		t.Errorf("POST /v1/completions on a new connection after the fault = %d, want 200", a.status)
	}
}
