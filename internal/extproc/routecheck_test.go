package extproc

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckEnvoyRouteSettings(t *testing.T) {
	cfg := parseConfig(t, twoPools)
	route := func(meta, setMeta string) string {
		return `
static_resources:
  listeners:
  - filter_chains:
    - filters:
      - typed_config:
          route_config:
            virtual_hosts:
            - routes:
              - response_headers_to_add:
                - header: {key: x-dualmap-upstream-host, value: "%UPSTREAM_HOST%"}
                typed_per_filter_config:
                  envoy.filters.http.ext_proc:
                    overrides:
                      grpc_initial_metadata: [` + meta + `]
                  envoy.filters.http.set_metadata:
                    metadata:
                    - metadata_namespace: dualmap
                      value: {` + setMeta + `}
`
	}
	tests := []struct {
		name, meta, setMeta string
		found, unknown      int
		err                 string
	}{
		{name: "ok", meta: "{key: x-dualmap-pool, value: batch}, {key: x-dualmap-slo, value: 2s}, {key: x-other, value: y}", setMeta: "route: r, priority: 3", found: 4},
		{name: "unknown", meta: "{key: x-dualmap-colour, value: blue}", setMeta: "shape: round", found: 2, unknown: 2},
		{name: "no such pool", meta: "{key: x-dualmap-pool, value: gpu}", err: `grpc_initial_metadata[0]: route setting from envoy: grpc_metadata pool = "gpu": no such pool`},
		{name: "no such class", setMeta: "slo: urgent", err: "set_metadata.metadata[0].value.slo"},
		{name: "list value", setMeta: "pool: [a]", err: "want a string, number or boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, unknown, err := CheckEnvoyRouteSettings(cfg, []byte(route(tt.meta, tt.setMeta)))
			if tt.err != "" {
				if err == nil || !errors.Is(err, errRouteSetting) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("CheckEnvoyRouteSettings() error = %v, want one mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil || found != tt.found || len(unknown) != tt.unknown {
				t.Errorf("CheckEnvoyRouteSettings() = %d, %v, %v; want %d found, %d unknown", found, unknown, err, tt.found, tt.unknown)
			}
		})
	}
}
