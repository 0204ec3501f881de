package sim

import (
	"strings"
	"testing"
)

// TestBoundsBound checks that no policy's SLO attainment exceeds the
// prefill bound at its rate on several generated workloads, at rates
// around the 90% bound, so that no swept rate above the 90% prefill bound
// reaches 90%: a run above its bound is a bug in the engine model or in the
// bound. The sweep's goodput, interpolated between points, is checked up to
// the step to the next point.
func TestBoundsBound(t *testing.T) {
	specs := []string{
		"seed=1,requests=800,max_input_tokens=16384",
		"shape=hot-prefix,seed=2,requests=800",
		"shape=chat,seed=3,requests=800,prompt_tokens=2000",
		"arrival=onoff,on_s=5,off_s=10,seed=4,requests=800,max_input_tokens=16384",
		"seed=5,requests=800,max_input_tokens=16384,slo_mix=1s:0.5/10s:0.5",
	}
	policies := []string{"dualmap", "dualmap-paper", "min-ttft", "preble", "least-loaded"}
	queues := []string{QueueRouter, QueuePaper}
	rates := []float64{0.7, 1.0, 1.1, 1.5}
	if raceEnabled || testing.Short() { // the same checks on a smaller sweep
		for i := range specs {
			specs[i] = strings.Replace(specs[i], "requests=800", "requests=400", 1)
		}
		specs = specs[:3]
		policies, queues, rates = policies[:3], queues[:1], rates[1:3]
	}
	var pols []Spec
	for _, p := range policies {
		sp, err := ParseSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, sp)
	}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			tr := genTrace(t, spec)
			base := Options{Instances: 4, Warmup: 100}
			o, err := base.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			b := upperBounds(tr, o)
			if b.prefill90 <= 0 || (b.prefill50 >= 0 && b.prefill50 < b.prefill90) || b.prefill90 < b.prefillQPS*0.99 {
				t.Fatalf("bounds: 90%% %.2f, 50%% %.2f, all requests %.2f: want 0 < all <= 90%% <= 50%% (-1: none)", b.prefill90, b.prefill50, b.prefillQPS)
			}
			var qps []float64
			for _, f := range rates {
				qps = append(qps, f*b.prefill90)
			}
			sw := &Sweep{Trace: tr, Specs: pols, Queues: queues, QPS: qps, Base: base, Workers: 2}
			rep, err := sw.Run()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Runs {
				if r.SLOAttainment > r.AttainmentBound+1e-9 {
					t.Errorf("%s/%s at %.2f QPS: attainment %.4f above the bound %.4f", r.Policy, r.Queue, r.QPS, r.SLOAttainment, r.AttainmentBound)
				}
				if r.QPS > rep.PrefillBound90QPS && r.SLOAttainment >= goodputLevel {
					t.Errorf("%s/%s at %.2f QPS: attainment %.4f above the 90%% prefill bound %.2f QPS", r.Policy, r.Queue, r.QPS, r.SLOAttainment, rep.PrefillBound90QPS)
				}
			}
			step := qps[len(qps)-1] - qps[len(qps)-2]
			for _, g := range rep.Goodput {
				if g.QPS > rep.PrefillBound90QPS+step {
					t.Errorf("%s/%s: goodput %.2f above the 90%% prefill bound %.2f", g.Policy, g.Queue, g.QPS, rep.PrefillBound90QPS)
				}
			}
			t.Logf("bounds: prefill all %.2f, 90%% %.2f, 50%% %.2f; work all %.2f, 90%% %.2f", rep.PrefillBoundQPS, rep.PrefillBound90QPS, rep.PrefillBound50QPS, rep.WorkBoundQPS, rep.WorkBound90QPS)
		})
	}
}
