package sim

import (
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
	splits := []PDSplit{{Mixed: 8}, {Prefill: 2, Decode: 6}, {Prefill: 4, Decode: 4}, {Prefill: 6, Decode: 2}}
	rows, err := PDSizing(tr, rates, Options{}, splits, []string{"dualmap", "least-loaded", "round-robin"}, PDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		if res := r.Result; res.Completed+res.Failed+res.Unfinished != res.Requests {
			t.Errorf("%s %s at %g: %d completed+failed+unfinished of %d", r.Split, r.Policy, r.QPS, res.Completed+res.Failed+res.Unfinished, res.Requests)
		}
	}
	if err := WritePDTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("P/D sizing, %s, %d requests:\n%s", path, len(tr.Requests), b.String())
}
