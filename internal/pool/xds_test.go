package pool

import (
	"fmt"
	"testing"

	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

func TestXDSWeightsRelative(t *testing.T) {
	eps := map[string]xds.Endpoint{
		"10.0.0.1:80": {Address: "10.0.0.1:80", Weight: 100},
		"10.0.0.2:80": {Address: "10.0.0.2:80", Weight: 300},
		"10.0.0.3:80": {Address: "10.0.0.3:80", Weight: 4000000000},
		"10.0.0.9:80": {Address: "10.0.0.9:80", Weight: 500}, // also static: the static one wins
	}
	list := withXDS([]scheduler.Instance{{ID: "10.0.0.9:80", Weight: 2}}, eps)
	got := map[string]float64{}
	for _, in := range list {
		got[in.ID] = in.Weight
	}
	want := map[string]float64{"10.0.0.1:80": 1, "10.0.0.2:80": 3, "10.0.0.3:80": maxXDSWeight, "10.0.0.9:80": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(list) != 4 {
		t.Errorf("withXDS() weights = %v, want %v", got, want)
	}
}

// An assignment goes through the pool's one membership path: weights
// relative to the lightest endpoint, DRAINING drains, UNHEALTHY takes the
// instance out until the server says otherwise, whatever the probes say.
func TestSetXDS(t *testing.T) {
	m := startManager(t, parseConfig(t, "pools:\n  - instances: [{address: 10.0.0.1:8000}]\n"), false, Options{})
	p := m.Pools()[0]
	eps := []xds.Endpoint{
		{Address: "10.0.1.1:8000", Weight: 1},
		{Address: "10.0.1.2:8000", Weight: 3, Health: xds.Draining},
		{Address: "10.0.1.3:8000", Weight: 1, Health: xds.Unhealthy},
	}
	if err := p.setXDS(eps); err != nil {
		t.Fatal(err)
	}
	p.Health("10.0.1.3:8000", true) // a probe that answers cannot bring it back
	got := map[string]string{}
	for _, st := range p.Instances() {
		got[st.ID] = fmt.Sprintf("healthy=%v draining=%v", st.Healthy, st.Draining)
	}
	want := map[string]string{
		"10.0.0.1:8000": "healthy=true draining=false", "10.0.1.1:8000": "healthy=true draining=false",
		"10.0.1.2:8000": "healthy=true draining=true", "10.0.1.3:8000": "healthy=false draining=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("instances = %v, want %v", got, want)
	}
	p.mu.Lock()
	list := withXDS(instances(p.static, p.dns), p.eds)
	p.mu.Unlock()
	for _, in := range list {
		if w := map[string]float64{"10.0.0.1:8000": 0, "10.0.1.1:8000": 1, "10.0.1.2:8000": 3, "10.0.1.3:8000": 1}[in.ID]; in.Weight != w {
			t.Errorf("instance %s weight = %v, want %v", in.ID, in.Weight, w)
		}
	}
}
