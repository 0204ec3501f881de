package sim

import (
	"math"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

func genTrace(t testing.TB, spec string) *trace.Trace {
	t.Helper()
	c, err := trace.ParseGenConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestPerRequestSLO checks that a request's own SLO decides whether it
// attains: at light load every request gets its first token within a
// second, so the 1 ms class misses and the 1 h class attains.
func TestPerRequestSLO(t *testing.T) {
	tr := genTrace(t, "seed=3,requests=1200,max_input_tokens=8192,slo_mix=1ms:0.3/1h:0.7")
	long := 0
	for _, r := range tr.Requests[200:] {
		if r.SLO == time.Hour {
			long++
		}
	}
	for _, policy := range []string{"dualmap", "round-robin"} {
		res, err := Simulate(tr, 1, Options{Policy: policy, Instances: 4, Warmup: 200})
		if err != nil {
			t.Fatal(err)
		}
		want := float64(long) / float64(res.Requests)
		if math.Abs(res.SLOAttainment-want) > 1e-9 {
			t.Errorf("%s: attainment %.4f, want the 1 h class's share %.4f", policy, res.SLOAttainment, want)
		}
		if len(res.Classes) != 2 || res.Classes[0].SLOSeconds != 0.001 || res.Classes[0].Attainment != 0 ||
			res.Classes[1].SLOSeconds != 3600 || res.Classes[1].Attainment != 1 {
			t.Errorf("%s: classes %+v", policy, res.Classes)
		}
	}
}

// TestPerRequestSLOReachesScheduler checks that the scheduler gets each
// request's own SLO.
func TestPerRequestSLOReachesScheduler(t *testing.T) {
	tr := genTrace(t, "seed=3,requests=50,slo_mix=2s:0.5/30s:0.5")
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{opt: o}
	c.load(tr, 0)
	for i := range c.reqs {
		r := &c.reqs[i]
		if r.s.SLO != tr.Requests[i].SLO || r.slo != tr.Requests[i].SLO.Seconds() {
			t.Fatalf("request %d: scheduler SLO %v, accounting SLO %v s, trace SLO %v", i, r.s.SLO, r.slo, tr.Requests[i].SLO)
		}
	}
}
