package extproc

import (
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/config"
)

// The series of an instance that leaves its pool are deleted (gauges and
// counters alike); those of the members stay, and an instance that comes
// back starts afresh.
func TestRemovedInstanceSeriesDeleted(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	p := ts.srv.pools[0]
	ts.srv.upstreamFailed(p, "10.0.0.4:8000")
	ts.srv.upstreamFailed(p, "10.0.0.1:8000")
	ts.srv.updateGauges()
	series := func(id string) []string {
		var out []string
		for k := range metricValues(t, ts) {
			if strings.Contains(k, "instance="+id) {
				out = append(out, k)
			}
		}
		return out
	}
	if len(series("10.0.0.4:8000")) < 5 {
		t.Fatalf("series of 10.0.0.4:8000 before it left: %v, want the gauges and its error count", series("10.0.0.4:8000"))
	}
	two := []config.Instance{{Address: "10.0.0.1:8000"}, {Address: "10.0.0.2:8000"}}
	if err := p.setMembers(&two, nil); err != nil {
		t.Fatal(err)
	}
	ts.srv.updateGauges()
	for _, gone := range []string{"10.0.0.3:8000", "10.0.0.4:8000"} {
		if s := series(gone); len(s) != 0 {
			t.Errorf("series of %s after it left: %v, want none", gone, s)
		}
	}
	if got := metricValues(t, ts)["dualmap_upstream_errors_total{instance=10.0.0.1:8000,pool=default}"]; got != 1 {
		t.Errorf("a member's error count = %g after another left, want 1", got)
	}
	back := append(two, config.Instance{Address: "10.0.0.4:8000"})
	if err := p.setMembers(&back, nil); err != nil {
		t.Fatal(err)
	}
	ts.srv.updateGauges()
	if got := metricValues(t, ts)["dualmap_upstream_errors_total{instance=10.0.0.4:8000,pool=default}"]; got != 0 {
		t.Errorf("a returning instance's error count = %g, want it afresh", got)
	}
}
