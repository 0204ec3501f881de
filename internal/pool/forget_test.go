package pool

import (
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/config"
)

// The series of an instance that leaves its pool are deleted (gauges and
// counters alike), in this package and through OnGone in others; those of
// the members stay, and an instance that comes back starts afresh.
func TestRemovedInstanceSeriesDeleted(t *testing.T) {
	m := startManager(t, parseConfig(t, fourInstances), false, Options{MembershipDelay: -1}) // every change at once
	var gone []string
	m.OnGone(func(pool, id string) { gone = append(gone, pool+"/"+id) })
	p := m.Pools()[0]
	p.failed("10.0.0.4:8000")
	p.failed("10.0.0.1:8000")
	m.UpdateGauges()
	series := func(id string) []string {
		var out []string
		for k := range m.metricValues(t) {
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
	m.UpdateGauges()
	for _, id := range []string{"10.0.0.3:8000", "10.0.0.4:8000"} {
		if s := series(id); len(s) != 0 {
			t.Errorf("series of %s after it left: %v, want none", id, s)
		}
	}
	if len(gone) != 2 {
		t.Errorf("OnGone saw %v, want the two instances that left", gone)
	}
	if got := m.metricValues(t)["dualmap_upstream_errors_total{instance=10.0.0.1:8000,pool=default}"]; got != 1 {
		t.Errorf("a member's error count = %g after another left, want 1", got)
	}
	back := append(two, config.Instance{Address: "10.0.0.4:8000"})
	if err := p.setMembers(&back, nil); err != nil {
		t.Fatal(err)
	}
	m.UpdateGauges()
	if got := m.metricValues(t)["dualmap_upstream_errors_total{instance=10.0.0.4:8000,pool=default}"]; got != 0 {
		t.Errorf("a returning instance's error count = %g, want it afresh", got)
	}
}
