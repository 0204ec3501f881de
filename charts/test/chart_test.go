// Package charttest lints and renders the Helm chart charts/dualmap with the
// Helm Go library (no helm binary), compares the output with golden files,
// decodes every rendered object strictly into its Kubernetes API type and
// loads the dualmap configuration the chart writes with the router's own
// config loader.
//
// It is a module of its own (charts/test/go.mod) so that Helm and the
// Kubernetes API modules stay out of the router's dependency graph; its
// import path lies under github.com/dualmap/dualmap, so it may use the
// router's internal packages (through a replace directive to ../..).
//
// Refresh the golden files after a deliberate chart change:
//
//	cd charts/test && go test -run TestChartGolden -update
package charttest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	chartDir    = "../dualmap"
	releaseName = "dm"
	namespace   = "llm"
)

// valueSets are the files in testdata/values, by name (without .yaml).
func valueSets(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("testdata/values/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	sort.Strings(names)
	if len(names) < 5 {
		t.Fatalf("want the defaults and at least four value sets in testdata/values, got %v", names)
	}
	return names
}

func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/values", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render is `helm template`: a client-only dry-run install. It returns the
// manifest and NOTES.txt.
func render(c *chart.Chart, vals map[string]any) (manifest, notes string, err error) {
	return renderAs(c, vals, releaseName)
}

func renderAs(c *chart.Chart, vals map[string]any, release string) (manifest, notes string, err error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	rel, err := install.RunWithContext(context.Background(), c, vals)
	if err != nil {
		return "", "", err
	}
	return rel.Manifest, rel.Info.Notes, nil
}

func TestChartLint(t *testing.T) {
	for _, name := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			l := lint.AllWithKubeVersionAndSchemaValidation(chartDir, readValues(t, name), namespace, nil, false)
			for _, m := range l.Messages {
				// Info (a missing icon) is not a fault; warnings and
				// errors are.
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestChartLintFails: lint reports bad values (the lint above can fail).
func TestChartLintFails(t *testing.T) {
	l := lint.AllWithKubeVersionAndSchemaValidation(chartDir, map[string]any{"mode": "sidecar"}, namespace, nil, false)
	if l.HighestSeverity < support.ErrorSev {
		t.Errorf("helm lint passed mode: sidecar: %v", l.Messages)
	}
}

func TestChartGolden(t *testing.T) {
	c := loadChart(t)
	for _, name := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			manifest, notes, err := render(c, readValues(t, name))
			if err != nil {
				t.Fatal(err)
			}
			got := generatedToken.ReplaceAllString(manifest, "${1}<generated>") + "\n# NOTES.txt\n" + commentOut(notes)
			golden := filepath.Join("testdata/golden", name+".yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update in charts/test)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the chart's output (go test -update in charts/test refreshes it after a deliberate change):\n%s", golden, firstDiff(string(want), got))
			}
		})
	}
}

// generatedToken is the admin token the chart draws at random (a Secret's
// data.token, 32 characters base64-encoded): the golden files hold a
// placeholder; TestChartAdminToken checks the value.
var generatedToken = regexp.MustCompile(`(?m)^(  token: )"[A-Za-z0-9+/]{43}="$`)

func commentOut(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	return b.String()
}

// firstDiff shows the first differing line with a little context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  golden: %q\n  chart:  %q", i+1, wl, gl)
		}
	}
	return "(equal)"
}

// TestChartObjects decodes every rendered object strictly into its API type
// and checks what each value set promises.
func TestChartObjects(t *testing.T) {
	c := loadChart(t)
	for _, name := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			manifest, _, err := render(c, readValues(t, name))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(manifest)
			if err != nil {
				t.Fatal(err)
			}
			checkObjects(t, name, objs)
		})
	}
}

// TestChartDashboardCopy: the chart's dashboard is docs/grafana/dualmap.json.
func TestChartDashboardCopy(t *testing.T) {
	a, err := os.ReadFile("../../docs/grafana/dualmap.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "dashboards/dualmap.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("charts/dualmap/dashboards/dualmap.json differs from docs/grafana/dualmap.json: cp docs/grafana/dualmap.json charts/dualmap/dashboards/")
	}
}
