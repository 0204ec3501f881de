package httpengine

import (
	"net/http"
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
