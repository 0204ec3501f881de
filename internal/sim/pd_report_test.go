package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// TestPDSizingReport compares, on one hardware budget of 8 instances, a
// mixed pool against 2P+6D, 4P+4D and 6P+2D prefill/decode pools, with
// DualMap (DualMap over the prefill half, decode-capacity over the decode
// half) and baselines (each applied to both halves), on the conversation
// trace at the rates DUALMAP_PD_QPS (default "4,5.5") with the default
// engine profile and no router queue (Queue engine, as SimulatePD). A
// report: it prints the table of docs/evaluation.md and asserts only that
// every run served its requests' accounting. Run with
//
//	DUALMAP_PD_REPORT=1 go test ./internal/sim -run TestPDSizingReport -v
func TestPDSizingReport(t *testing.T) {
	if os.Getenv("DUALMAP_PD_REPORT") == "" {
		t.Skip("set DUALMAP_PD_REPORT=1 to run the P/D sizing report")
	}
	path := os.Getenv("DUALMAP_PD_TRACE")
	if path == "" {
		path = "../../../shared/traces/conversation_trace.jsonl"
	}
	tr, err := trace.ReadFile(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rates := []float64{4, 5.5}
	if s := os.Getenv("DUALMAP_PD_QPS"); s != "" {
		rates = rates[:0]
		for _, f := range strings.Split(s, ",") {
			q, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			rates = append(rates, q)
		}
	}
	type setup struct {
		name     string
		pre, dec int
	}
	setups := []setup{{"8 mixed", 0, 0}, {"2P+6D", 2, 6}, {"4P+4D", 4, 4}, {"6P+2D", 6, 2}}
	var b strings.Builder
	fmt.Fprintf(&b, "| QPS | pool | policy | SLO attainment | TTFT p50 | TTFT p90 | E2E p50 | E2E p90 | hit rate | remote prefills |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, qps := range rates {
		for _, st := range setups {
			for _, pol := range []string{"dualmap", "least-loaded", "round-robin"} {
				opt := Options{Policy: pol, Queue: QueueEngine, Instances: 8}
				var res *Result
				remote := "-"
				policy := pol
				if st.pre == 0 {
					res, err = Simulate(tr, qps, opt)
				} else {
					pd := PDOptions{Prefill: st.pre, Decode: st.dec}
					if pol != "dualmap" {
						pd.DecodePolicy = pol
					} else {
						policy = "dualmap + decode-capacity"
					}
					var pr *PDResult
					pr, err = SimulatePD(tr, qps, opt, pd)
					if err == nil {
						res = pr.Result
						remote = fmt.Sprintf("%.0f%%", 100*float64(pr.Remote)/float64(max(res.Requests, 1)))
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Completed + res.Failed + res.Unfinished; got != res.Requests {
					t.Errorf("%s %s at %g: %d completed+failed+unfinished of %d", st.name, pol, qps, got, res.Requests)
				}
				fmt.Fprintf(&b, "| %g | %s | %s | %.1f%% | %.2f s | %.2f s | %.1f s | %.1f s | %.1f%% | %s |\n", qps, st.name, policy,
					100*res.SLOAttainment, res.TTFTP50, res.TTFTP90, res.E2EP50, res.E2EP90, 100*res.CacheHitRate, remote)
			}
		}
	}
	t.Logf("P/D sizing, %s, %d requests:\n%s", path, len(tr.Requests), b.String())
}
