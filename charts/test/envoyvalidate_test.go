package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChartEnvoyValidates runs the real Envoy (DUALMAP_ENVOY, installed by
// scripts/envoy.sh; make chart sets it) in --mode validate on the front
// proxy's config of every value set that renders one: what the strict
// proto decoding cannot see (listener and cluster semantics, filter
// configs) fails here.
func TestChartEnvoyValidates(t *testing.T) {
	envoy := os.Getenv("DUALMAP_ENVOY")
	if envoy == "" {
		t.Skip("DUALMAP_ENVOY not set (make chart sets it from scripts/envoy.sh)")
	}
	c := loadChart(t)
	n := 0
	for _, name := range valueSets(t) {
		manifest, _, err := render(c, readValues(t, name))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(manifest)
		if err != nil {
			t.Fatal(err)
		}
		cm, ok := find[*corev1.ConfigMap](objs, full+"-envoy")
		if !ok {
			continue
		}
		n++
		f := filepath.Join(t.TempDir(), "envoy.yaml")
		if err := os.WriteFile(f, []byte(cm.Data["envoy.yaml"]), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(envoy, "--mode", "validate", "-c", f, "--log-level", "warn").CombinedOutput()
		if err != nil {
			t.Errorf("%s: envoy --mode validate: %v\n%s", name, err, out)
		}
	}
	if n == 0 {
		t.Error("no value set renders the Envoy front proxy")
	}
}
