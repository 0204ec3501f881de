package peerbench

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dualmap/dualmap/internal/replay"
)

// FromReplay fills the client-side figures of r from a replay's results:
// requests, failures by status, TTFT and E2E percentiles of the successful
// requests, and output tokens per second (completion tokens the server
// reported over the replay's duration).
func (r *Row) FromReplay(results []replay.Result, sum replay.Summary) {
	r.Requests, r.OK, r.Failed = sum.Requests, sum.OK, sum.Failed
	r.ByStatus = map[int]int{}
	var out int
	for _, x := range results {
		if !x.OK() {
			r.ByStatus[x.Status]++
			continue
		}
		out += x.CompletionTokens
	}
	r.TTFTP50MS, r.TTFTP90MS, r.TTFTP99MS = MS(sum.TTFT.P50), MS(sum.TTFT.P90), MS(sum.TTFT.P99)
	r.E2EP50MS = MS(sum.E2E.P50)
	r.Duration = sum.Duration.Seconds()
	if r.Duration > 0 {
		r.OutputTPS = float64(out) / r.Duration
	}
}

// ClientResult is the JSON line an outside client's runner prints last
// (scripts/aiperf-run.sh).
type ClientResult struct {
	TTFTP50MS *float64 `json:"ttft_p50_ms"`
	TTFTP90MS *float64 `json:"ttft_p90_ms"`
	TTFTP99MS *float64 `json:"ttft_p99_ms"`
	E2EP50MS  *float64 `json:"e2e_p50_ms"`
	OutputTPS *float64 `json:"output_tokens_per_s"`
	Requests  *int     `json:"requests"`
	Failed    *int     `json:"failed"`
}

// FromClientJSON fills the client-side figures of r from the last
// non-empty line of a runner's standard output, a JSON object with every
// key of ClientResult. Failures by status are not known then.
func (r *Row) FromClientJSON(stdout string) error {
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return fmt.Errorf("peerbench: client: no output")
	}
	var c ClientResult
	if err := json.Unmarshal([]byte(last), &c); err != nil {
		return fmt.Errorf("peerbench: client: last line %q: %w", excerpt(last), err)
	}
	var missing []string
	for _, f := range []struct {
		name string
		ok   bool
	}{{"ttft_p50_ms", c.TTFTP50MS != nil}, {"ttft_p90_ms", c.TTFTP90MS != nil}, {"ttft_p99_ms", c.TTFTP99MS != nil},
		{"e2e_p50_ms", c.E2EP50MS != nil}, {"output_tokens_per_s", c.OutputTPS != nil}, {"requests", c.Requests != nil}, {"failed", c.Failed != nil}} {
		if !f.ok {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("peerbench: client: last line lacks %s", strings.Join(missing, ", "))
	}
	if *c.Requests < 0 || *c.Failed < 0 || *c.Failed > *c.Requests {
		return fmt.Errorf("peerbench: client: %d failed of %d requests", *c.Failed, *c.Requests)
	}
	r.TTFTP50MS, r.TTFTP90MS, r.TTFTP99MS, r.E2EP50MS, r.OutputTPS = *c.TTFTP50MS, *c.TTFTP90MS, *c.TTFTP99MS, *c.E2EP50MS, *c.OutputTPS
	r.Requests, r.Failed, r.OK = *c.Requests, *c.Failed, *c.Requests-*c.Failed
	return nil
}

func excerpt(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
