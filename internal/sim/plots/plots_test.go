package plots

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dualmap/dualmap/internal/sim"
)

// run builds a Result of policy/queue at qps with a few TTFTs, and with a
// load timeline and attainment windows when timeline is set.
func run(policy, queue string, qps, attainment float64, timeline bool) *sim.Result {
	r := &sim.Result{
		Policy: policy, Queue: queue, QPS: qps, SLOAttainment: attainment,
		CacheHitRate: 0.4, LoadCV: 0.2,
		TTFTs: []float64{0.1, 0.2, 0.4, 0.8, 1.6},
	}
	if timeline {
		r.Timeline = []sim.Sample{{T: 0, Load: []int{10, 20}}, {T: 1, Load: []int{30, 5}}, {T: 2, Load: []int{0, 0, 7}}}
		r.Windows = []sim.Window{{Start: 0, Requests: 10, Attainment: 1}, {Start: sim.WindowSeconds, Requests: 0}, {Start: 2 * sim.WindowSeconds, Requests: 5, Attainment: 0.6}}
	}
	return r
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		rep  *sim.Report
		want []string // charts written; the others must not be
	}{
		{
			name: "sweep",
			rep: &sim.Report{SLOSeconds: 5, Instances: 2, UpperBoundHitRate: 0.7, Runs: []*sim.Result{
				run("dualmap", "router", 1, 1, false), run("dualmap", "router", 2, 0.8, false),
				run("round-robin", "router", 1, 0.9, false), run("round-robin", "router", 2, 0.5, false),
			}},
			want: []string{"attainment.png", "pareto.png", "ttft_cdf.png"},
		},
		{
			name: "timeline",
			rep:  &sim.Report{SLOSeconds: 5, Instances: 3, Runs: []*sim.Result{run("dualmap", "router", 1, 0.9, true)}},
			want: []string{"attainment.png", "pareto.png", "ttft_cdf.png", "load_timeline.png", "attainment_over_time.png"},
		},
	}
	all := []string{"attainment.png", "pareto.png", "ttft_cdf.png", "load_timeline.png", "attainment_over_time.png"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "charts") // Write creates it
			if err := Write(dir, tt.rep); err != nil {
				t.Fatalf("Write() = %v", err)
			}
			want := map[string]bool{}
			for _, f := range tt.want {
				want[f] = true
			}
			for _, f := range all {
				st, err := os.Stat(filepath.Join(dir, f))
				switch {
				case want[f] && (err != nil || st.Size() < 1000):
					t.Errorf("Write() chart %s missing or empty: %v", f, err)
				case !want[f] && err == nil:
					t.Errorf("Write() wrote %s, want no such chart for this report", f)
				}
			}
		})
	}
}
