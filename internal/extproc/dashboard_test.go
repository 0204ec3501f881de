package extproc

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

var metricRe = regexp.MustCompile(`\bdualmap_[a-z0-9_]+`)

// dashboardMetrics returns the metric names the Grafana dashboard's
// queries use, sorted.
func dashboardMetrics(t *testing.T) []string {
	raw, err := os.ReadFile("../../docs/grafana/dualmap.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("docs/grafana/dualmap.json: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	var names []string
	for _, e := range exprs {
		names = append(names, metricRe.FindAllString(e, -1)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestDashboardMetricsExist serves one streamed request from headers to
// its last chunk, lets the gauges update, and checks that every metric the
// dashboard queries is exported, and that every exported dualmap_ metric
// is documented in the README.
func TestDashboardMetricsExist(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	c := ts.open(t)
	ts.post(t, c, "/v1/chat/completions", chat("m", "hello there", true))
	c.responseHeaders(t, "200")
	c.send(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte("data: {}\n\n"), EndOfStream: true}}})
	c.close()
	ts.srv.pools.UpdateGauges()
	fams, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range fams {
		if len(f.GetMetric()) > 0 {
			have[f.GetName()] = true
		}
	}
	names := dashboardMetrics(t)
	if len(names) < 10 {
		t.Fatalf("the dashboard queries %d dualmap metrics: %v", len(names), names)
	}
	for _, n := range names {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && have[b] {
				base = b
			}
		}
		if !have[base] {
			t.Errorf("the dashboard queries %s, which the server does not export", n)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range have {
		if strings.HasPrefix(n, "dualmap_") && !strings.Contains(string(readme), "`"+n+"`") {
			t.Errorf("metric %s is not documented in README.md", n)
		}
	}
}
