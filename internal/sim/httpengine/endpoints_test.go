package httpengine

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestModels(t *testing.T) {
	_, url := start(t, Options{Model: "qwen-sim", Name: "e1"})
	a := do(t, "GET", url+"/v1/models", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /v1/models status = %d, want 200", a.status)
	}
	if got := a.header.Get("x-engine-name"); got != "e1" {
		t.Errorf("x-engine-name = %q, want %q", got, "e1")
	}
	m := decode(t, a.body)
	if m["object"] != "list" {
		t.Errorf("object = %v, want list", m["object"])
	}
	data, _ := m["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("data = %v, want one model", m["data"])
	}
	model := data[0].(map[string]any)
	for k, want := range map[string]any{"id": "qwen-sim", "object": "model", "owned_by": "dualmap", "max_model_len": float64(20480)} {
		if model[k] != want {
			t.Errorf("model %s = %v, want %v", k, model[k], want)
		}
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name   string
		down   bool
		refuse bool
		want   int
	}{
		{"up", false, false, http.StatusOK},
		{"down", true, false, http.StatusServiceUnavailable},
		{"refusing", false, true, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(fast())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetFaults(Faults{Down: tt.down}); err != nil {
				t.Fatal(err)
			}
			s.SetRefuse(tt.refuse)
			// Straight to the handler: a refusing listener would not let
			// the request in.
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, mustRequest(t, "GET", "/health", ""))
			if w.Code != tt.want {
				t.Errorf("GET /health = %d, want %d", w.Code, tt.want)
			}
			if got := w.Header().Get("x-engine-name"); got != "test-engine" {
				t.Errorf("x-engine-name = %q, want test-engine", got)
			}
		})
	}
}

func TestUnknownRoutes(t *testing.T) {
	_, url := start(t, fast())
	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/chat/completions", http.StatusMethodNotAllowed},
		{"POST", "/v1/responses", http.StatusNotFound},
		{"GET", "/nope", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a := do(t, tt.method, url+tt.path, "")
			if a.status != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, a.status, tt.want)
			}
			if a.header.Get("x-engine-name") == "" {
				t.Errorf("%s %s: no x-engine-name header", tt.method, tt.path)
			}
		})
	}
}

func TestDestinationEcho(t *testing.T) {
	s, err := New(fast())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dest string
	}{
		{"primary and fallback", "127.0.0.1:8001,127.0.0.1:8002"},
		{"primary only", "127.0.0.1:8001"},
		{"none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRequest(t, "GET", "/v1/models", "")
			if tt.dest != "" {
				r.Header.Set(DestinationHeader, tt.dest)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			got, ok := w.Result().Header[http.CanonicalHeaderKey(HeaderDestination)]
			if tt.dest == "" && ok {
				t.Errorf("%s = %q with no %s, want no header", HeaderDestination, got, DestinationHeader)
			}
			if tt.dest != "" && (len(got) != 1 || got[0] != tt.dest) {
				t.Errorf("%s = %q, want %q", HeaderDestination, got, tt.dest)
			}
		})
	}
}
