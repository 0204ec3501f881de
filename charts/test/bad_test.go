package charttest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dualmap/dualmap/internal/config"
)

// TestChartRejectsBadValues: values.schema.json (and the templates' own
// checks) fail the install, naming the key, before anything is applied.
func TestChartRejectsBadValues(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"misspelled mode", map[string]any{"mode": "standlone"}, "mode"},
		{"unknown top-level key", map[string]any{"replicaCuont": 2}, "replicaCuont"},
		{"zero replicas", map[string]any{"replicaCount": 0}, "replicaCount"},
		{"unquoted off", map[string]any{"tls": map[string]any{"mode": false}}, "tls"},
		{"mutual TLS with the chart's Envoy", map[string]any{"tls": map[string]any{"mode": "files", "existingSecret": "s", "clientCA": true}}, "tls.clientCA"},
		{"certificate without key", map[string]any{"tls": map[string]any{"mode": "files", "cert": "PEM"}}, "tls.key"},
		{"files without a Secret", map[string]any{"tls": map[string]any{"mode": "files"}}, "existingSecret"},
		{"pool without selector", map[string]any{"mode": "inferencePool"}, "selector"},
		{"bad failureMode", map[string]any{"mode": "inferencePool", "inferencePool": map[string]any{"selector": map[string]any{"app": "x"}, "failureMode": "Open"}}, "failureMode"},
		{"external Redis without addrs", map[string]any{"redis": map[string]any{"external": map[string]any{"enabled": true}}}, "addrs"},
		{"both Redis", map[string]any{"redis": map[string]any{"bundled": map[string]any{"enabled": true}, "external": map[string]any{"enabled": true, "addrs": []any{"r:6379"}}}}, "choose one"},
		{"pools under config", map[string]any{"config": map[string]any{"pools": []any{}}}, "pools"},
		{"instance without port", map[string]any{"standalone": map[string]any{"pools": []any{map[string]any{"name": "p", "instances": []any{map[string]any{"address": "10.0.0.1"}}}}}}, "address"},
		{"bad port", map[string]any{"ports": map[string]any{"grpc": 70000, "health": 9003, "admin": 9090}}, "grpc"},
		{"bad duration", map[string]any{"inferencePool": map[string]any{"discoveryInterval": "10 seconds"}}, "discoveryInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := render(c, tc.vals)
			if err == nil {
				t.Fatalf("values %v rendered", tc.vals)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %q: %v", tc.want, err)
			}
		})
	}
}

// TestChartConfigErrorsReachTheLoader: what the schema lets through into
// the free-form config section is caught by the router's loader in the
// test, as the router would at start.
func TestChartConfigErrorsReachTheLoader(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"misspelled limit", map[string]any{"limits": map[string]any{"max_body_byte": 1}}, "max_body_byte"},
		{"bad routing mode", map[string]any{"routing": map[string]any{"mode": "nearest"}}, "routing.mode"},
		// The loader names the value, not the key, of a bad duration.
		{"bad SLO", map[string]any{"slo": map[string]any{"default": "soon"}}, `"soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No admin token file: the loader would stop at its absence first.
			manifest, _, err := render(c, map[string]any{"config": tc.cfg, "adminToken": map[string]any{"generate": false}})
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(manifest)
			if err != nil {
				t.Fatal(err)
			}
			cm, ok := find[*corev1.ConfigMap](objs, full)
			if !ok {
				t.Fatal("no config")
			}
			_, err = config.Parse([]byte(cm.Data["dualmap.yaml"]), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loader error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestDecodeIsStrict: a misspelled field in a rendered object fails.
func TestDecodeIsStrict(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: x}\nspec: {endpointPickerRef: {name: e, failuremode: FailOpen}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x, name: y}\n",
		"apiVersion: v1\nkind: Frobnicator\nmetadata: {name: x}\n",
	} {
		if _, err := decodeAll(doc); err == nil {
			t.Errorf("decoded:\n%s", doc)
		}
	}
	if err := decodeBootstrap("static_resources: {clusters: [{name: a, connect_timout: 1s}]}\n"); err == nil {
		t.Error("Envoy config with a misspelled field decoded")
	}
}
