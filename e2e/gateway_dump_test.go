//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/config"
)

// What a gateway generates for its endpoint picker, read back from its
// Envoy's admin /config_dump and checked against what dualmap relies on,
// so that a gateway upgrade that changes one of them fails here by name.
// docs/gateways.md tabulates the values these tests log.

const extProcType = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"

// extProcDump is the part of an ext_proc filter's configuration dualmap
// depends on, as /config_dump renders it (proto field names).
type extProcDump struct {
	GrpcService struct {
		EnvoyGrpc struct {
			ClusterName string `json:"cluster_name"`
			Authority   string `json:"authority"`
		} `json:"envoy_grpc"`
		Timeout     string `json:"timeout"`
		RetryPolicy struct {
			RetryOn string `json:"retry_on"`
		} `json:"retry_policy"`
	} `json:"grpc_service"`
	FailureModeAllow  bool   `json:"failure_mode_allow"`
	MessageTimeout    string `json:"message_timeout"`
	AllowModeOverride bool   `json:"allow_mode_override"`
	ProcessingMode    struct {
		RequestHeaderMode   string `json:"request_header_mode"`
		ResponseHeaderMode  string `json:"response_header_mode"`
		RequestBodyMode     string `json:"request_body_mode"`
		ResponseBodyMode    string `json:"response_body_mode"`
		RequestTrailerMode  string `json:"request_trailer_mode"`
		ResponseTrailerMode string `json:"response_trailer_mode"`
	} `json:"processing_mode"`
	MetadataOptions struct {
		Forwarding struct {
			Untyped []string `json:"untyped"`
		} `json:"forwarding_namespaces"`
		Receiving struct {
			Untyped []string `json:"untyped"`
		} `json:"receiving_namespaces"`
	} `json:"metadata_options"`
	MutationRules struct {
		DisallowIsError bool `json:"disallow_is_error"`
	} `json:"mutation_rules"`
}

// mode is a processing mode as Envoy applies it: an unset field (or
// DEFAULT) means SEND for headers, NONE for bodies, SKIP for trailers.
func mode(v, zero string) string {
	if v == "" || v == "DEFAULT" {
		return zero
	}
	return v
}

// findExtProc walks the listeners of a /config_dump (static and dynamic;
// the bootstrap's copy is not counted) for ext_proc filter configurations.
func findExtProc(t testing.TB, dump []byte) []extProcDump {
	t.Helper()
	var all struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.Unmarshal(dump, &all); err != nil {
		t.Fatalf("config_dump: %v", err)
	}
	var root []any
	for _, c := range all.Configs {
		if typ, _ := c["@type"].(string); strings.HasSuffix(typ, ".ListenersConfigDump") {
			root = append(root, c)
		}
	}
	var out []extProcDump
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["@type"] == extProcType {
				b, _ := json.Marshal(x)
				var e extProcDump
				if err := json.Unmarshal(b, &e); err != nil {
					t.Fatalf("ext_proc config: %v", err)
				}
				out = append(out, e)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(root)
	return out
}

// checkExtProc checks one ext_proc configuration against what dualmap
// needs, with want's failure mode, and returns a row of docs/gateways.md.
func checkExtProc(t *testing.T, gateway string, e extProcDump, failOpen bool) string {
	t.Helper()
	cfg, err := config.Load(filepath.Join(repoRoot, "examples", "gateway-epp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pm := e.ProcessingMode
	got := map[string]string{
		"request_header_mode":   mode(pm.RequestHeaderMode, "SEND"),
		"response_header_mode":  mode(pm.ResponseHeaderMode, "SEND"),
		"request_body_mode":     mode(pm.RequestBodyMode, "NONE"),
		"response_body_mode":    mode(pm.ResponseBodyMode, "NONE"),
		"request_trailer_mode":  mode(pm.RequestTrailerMode, "SKIP"),
		"response_trailer_mode": mode(pm.ResponseTrailerMode, "SKIP"),
	}
	want := map[string]string{
		// dualmap reads the request headers and body (the prompt) and the
		// response headers (status, served endpoint) and body (first token,
		// end); full duplex needs both trailer modes SEND.
		"request_header_mode":   "SEND",
		"response_header_mode":  "SEND",
		"request_body_mode":     "FULL_DUPLEX_STREAMED",
		"response_body_mode":    "FULL_DUPLEX_STREAMED",
		"request_trailer_mode":  "SEND",
		"response_trailer_mode": "SEND",
	}
	for _, k := range []string{"request_header_mode", "response_header_mode", "request_body_mode", "response_body_mode", "request_trailer_mode", "response_trailer_mode"} {
		if got[k] != want[k] {
			t.Errorf("%s: processing_mode.%s = %s, want %s", gateway, k, got[k], want[k])
		}
	}
	if !slices.Contains(e.MetadataOptions.Receiving.Untyped, "envoy.lb") {
		t.Errorf("%s: metadata_options.receiving_namespaces %v: without envoy.lb Envoy drops dualmap's pick metadata", gateway, e.MetadataOptions.Receiving.Untyped)
	}
	if !slices.Contains(e.MetadataOptions.Forwarding.Untyped, "envoy.lb") {
		t.Errorf("%s: metadata_options.forwarding_namespaces %v: without envoy.lb dualmap gets no served-endpoint metadata", gateway, e.MetadataOptions.Forwarding.Untyped)
	}
	mt, err := time.ParseDuration(e.MessageTimeout)
	if e.MessageTimeout == "" {
		mt, err = 200*time.Millisecond, nil // Envoy's default
	}
	if err != nil || mt <= cfg.Limits.MaxQueueWait {
		t.Errorf("%s: message_timeout %q (%v): must be above limits.max_queue_wait %v, or a queued request gets Envoy's 504", gateway, e.MessageTimeout, err, cfg.Limits.MaxQueueWait)
	}
	if !slices.Contains(strings.Split(e.GrpcService.RetryPolicy.RetryOn, ","), "connect-failure") {
		t.Errorf("%s: grpc_service.retry_policy.retry_on %q: without connect-failure, a stream Envoy opens to a dualmap replica just killed fails its request", gateway, e.GrpcService.RetryPolicy.RetryOn)
	}
	if e.AllowModeOverride {
		t.Errorf("%s: allow_mode_override true: dualmap never overrides the mode; a true here means the gateway expects it to", gateway)
	}
	if e.FailureModeAllow != failOpen {
		t.Errorf("%s: failure_mode_allow = %v, want %v", gateway, e.FailureModeAllow, failOpen)
	}
	fwd, recv := strings.Join(e.MetadataOptions.Forwarding.Untyped, ", "), strings.Join(e.MetadataOptions.Receiving.Untyped, ", ")
	row := fmt.Sprintf("| %s | %s / %s | %s / %s | %s / %s | %s | %s | %s | %v | %v | %v | %s |",
		gateway, got["request_header_mode"], got["response_header_mode"], got["request_body_mode"], got["response_body_mode"],
		got["request_trailer_mode"], got["response_trailer_mode"], orNone(fwd), orNone(recv), orDefault(e.MessageTimeout, "200ms (default)"),
		e.AllowModeOverride, e.FailureModeAllow, e.MutationRules.DisallowIsError, orDefault(e.GrpcService.Timeout, "none"))
	t.Logf("%s ext_proc: %+v\ndocs/gateways.md row:\n%s", gateway, e, row)
	return row
}

func orNone(s string) string { return orDefault(s, "none") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Our gateway-style bootstrap, read back from its Envoy: the reference
// the other gateways are compared with.
func TestGatewayConfigDumpBootstrap(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	procs := findExtProc(t, []byte(g.envoyGet(t, "/config_dump")))
	if len(procs) != 1 {
		t.Fatalf("envoy/gateway-epp.yaml: %d ext_proc filters in /config_dump, want 1", len(procs))
	}
	checkExtProc(t, "bootstrap (envoy/gateway-epp.yaml)", procs[0], false)
}

// Envoy Gateway v1.9.1 from examples/envoy-gateway: its generated ext_proc
// filter, the picker cluster (TLS, HTTP/2) and the pool cluster's
// override_host policy.
func TestGatewayConfigDumpEnvoyGateway(t *testing.T) {
	if envoyGatewayBin == "" {
		t.Skip("DUALMAP_ENVOY_GATEWAY is not set (make e2e-gateways builds Envoy Gateway with scripts/envoy-gateway.sh and sets it)")
	}
	g := startEnvoyGatewayPicker(t, pickerOptions{})
	dump := g.envoyGet(t, "/config_dump?include_eds")
	procs := findExtProc(t, []byte(dump))
	if len(procs) != 1 {
		t.Fatalf("Envoy Gateway: %d ext_proc filters in /config_dump, want 1", len(procs))
	}
	checkExtProc(t, "Envoy Gateway v1.9.1 (examples/envoy-gateway)", procs[0], false)
	cluster := procs[0].GrpcService.EnvoyGrpc.ClusterName
	var root struct {
		Configs []json.RawMessage `json:"configs"`
	}
	if err := json.Unmarshal([]byte(dump), &root); err != nil {
		t.Fatal(err)
	}
	var pickerCluster, poolCluster string
	for _, c := range root.Configs {
		var cd struct {
			Type     string `json:"@type"`
			Clusters []struct {
				Cluster json.RawMessage `json:"cluster"`
			} `json:"dynamic_active_clusters"`
		}
		if json.Unmarshal(c, &cd) != nil || !strings.HasSuffix(cd.Type, "ClustersConfigDump") {
			continue
		}
		for _, dc := range cd.Clusters {
			var name struct {
				Name string `json:"name"`
			}
			json.Unmarshal(dc.Cluster, &name)
			switch {
			case name.Name == cluster:
				pickerCluster = string(dc.Cluster)
			case strings.Contains(string(dc.Cluster), "envoy.load_balancing_policies.override_host"):
				poolCluster = string(dc.Cluster)
			}
		}
	}
	if pickerCluster == "" {
		t.Fatalf("Envoy Gateway: the picker's cluster %q is not in /config_dump", cluster)
	}
	for _, want := range []string{"UpstreamTlsContext", "http2_protocol_options"} {
		if !strings.Contains(pickerCluster, want) {
			t.Errorf("Envoy Gateway's picker cluster has no %s (gRPC over TLS to dualmap's self-signed port):\n%s", want, pickerCluster)
		}
	}
	if poolCluster == "" || !strings.Contains(poolCluster, `"x-gateway-destination-endpoint"`) {
		t.Errorf("Envoy Gateway: no cluster with override_host on x-gateway-destination-endpoint (BackendTrafficPolicy endpointOverride):\n%s", poolCluster)
	}
	t.Logf("picker cluster: %s\npool cluster: %s", pickerCluster, poolCluster)
}
