//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Per-route settings through a real Envoy (envoy/front-proxy.yaml): the
// interactive route and the batch route reach different pools with
// different SLOs and priorities, set by Envoy as gRPC initial metadata
// (ExtProcPerRoute overrides) and as forwarded dynamic metadata
// (set_metadata, namespace dualmap: the route's name). A client's looser
// SLO is clamped, a tighter one honoured, a forged priority ignored.
func TestRouteSettingsThroughEnvoy(t *testing.T) {
	var interactive, batch []string
	s := startStack(t, stackOptions{pools: func(e []string) string {
		interactive, batch = e[:2], e[2:]
		return fmt.Sprintf(`pools:
  - name: default
    models: ["*"]
    block_size: 16
    instances: [{address: %s}, {address: %s}]
  - name: batch
    models: [summarizer]
    block_size: 16
    instances: [{address: %s}, {address: %s}]
`, e[0], e[1], e[2], e[3])
	}})
	tests := []struct {
		name                   string
		hdr                    []string
		engines                []string
		pool, slo, prio, route string
	}{
		{"interactive", nil, interactive, "default", "5000", "10", "interactive"},
		{"interactive, forged priority, looser SLO", []string{"x-dualmap-priority", "1000", "x-dualmap-slo", "120s"}, interactive, "default", "5000", "10", "interactive"},
		{"interactive, tighter SLO", []string{"x-dualmap-slo", "1500ms"}, interactive, "default", "1500", "10", "interactive"},
		{"batch", []string{"x-llm-workload", "batch"}, batch, "batch", "60000", "0", "batch"},
		{"batch, forged priority", []string{"x-llm-workload", "batch", "x-dualmap-priority", "1000"}, batch, "batch", "60000", "0", "batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 6; i++ {
				r := s.post("/v1/chat/completions", chatBody(systemPrompt, fmt.Sprintf("%s %d", tt.name, i), false, 4), tt.hdr...)
				if r.status != 200 || r.err != nil {
					t.Fatalf("request %d: %v", i, r)
				}
				h := r.header
				got := fmt.Sprintf("pool=%s slo_ms=%s priority=%s route=%s", h.Get("x-dualmap-pool"), h.Get("x-dualmap-slo-ms"), h.Get("x-dualmap-priority"), h.Get("x-dualmap-route"))
				want := fmt.Sprintf("pool=%s slo_ms=%s priority=%s route=%s", tt.pool, tt.slo, tt.prio, tt.route)
				if got != want {
					t.Fatalf("request %d: %s, want %s", i, got, want)
				}
				if !slices.Contains(tt.engines, r.engine) || r.engine != r.instance {
					t.Fatalf("request %d: decided %s, served by %s; want one of %v", i, r.instance, r.engine, tt.engines)
				}
			}
		})
	}
}

// The filter's own grpc_service.initial_metadata reaches dualmap with every
// stream, merged with a route's overrides (not replaced by them): with
// x-dualmap-client-slo: none there, the interactive route (which overrides
// slo and priority) ignores a client's tighter SLO too.
func TestFilterLevelSettingsThroughEnvoy(t *testing.T) {
	s := startStack(t, stackOptions{engines: 2, renderEnvoy: func(c string) string {
		const from = "{key: x-dualmap-client-slo, value: tighter}"
		if !strings.Contains(c, from) {
			t.Fatalf("front-proxy.yaml no longer has %s", from)
		}
		return strings.Replace(c, from, "{key: x-dualmap-client-slo, value: none}", 1)
	}})
	r := s.post("/v1/chat/completions", chatBody(systemPrompt, "hi", false, 4), "x-dualmap-slo", "1500ms")
	if r.status != 200 {
		t.Fatalf("request: %v", r)
	}
	if got := r.header.Get("x-dualmap-slo-ms") + " " + r.header.Get("x-dualmap-priority"); got != "5000 10" {
		t.Errorf("slo_ms, priority = %s; want 5000 10 (the client's SLO ignored, the route's overrides kept)", got)
	}
}
