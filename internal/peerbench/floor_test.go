package peerbench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/replay"
)

func TestParsePrefillCost(t *testing.T) {
	// The benchmark's own profile parses to its documented costs.
	f, err := os.Open(filepath.Join("..", "..", "e2e", "testdata", "llmd-sim-profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ParsePrefillCost(f)
	if err != nil || c != (PrefillCost{Overhead: 30 * time.Millisecond, PerToken: 250 * time.Microsecond}) {
		t.Fatalf("the benchmark profile: %+v, %v", c, err)
	}
	for name, profile := range map[string]string{
		"constant calculator": "latency-calculator: constant\nprefill-overhead: 30ms\nprefill-time-per-token: 250us\n",
		"no calculator":       "prefill-overhead: 30ms\nprefill-time-per-token: 250us\n",
		"no per-token":        "latency-calculator: per-token\nprefill-overhead: 30ms\n",
		"no overhead":         "latency-calculator: per-token\nprefill-time-per-token: 250us\n",
		"negative":            "latency-calculator: per-token\nprefill-overhead: -1ms\nprefill-time-per-token: 250us\n",
		"not a duration":      "latency-calculator: per-token\nprefill-overhead: 30\nprefill-time-per-token: 250us\n",
		"not yaml":            "latency-calculator: [per-token\n",
	} {
		if c, err := ParsePrefillCost(strings.NewReader(profile)); err == nil {
			t.Errorf("%s: %+v, want an error", name, c)
		}
	}
}

func TestFloorOf(t *testing.T) {
	cost := PrefillCost{Overhead: 30 * time.Millisecond, PerToken: 250 * time.Microsecond}
	var res []replay.Result
	// Ten requests of 1,000 prompt tokens: the first all uncached, the
	// others 100 x i uncached (cached 1,000 - 100 x i).
	for i := 0; i < 10; i++ {
		cached := 0
		if i > 0 {
			cached = 1000 - 100*i
		}
		res = append(res, replay.Result{Index: i, Status: 200, Usage: true, PromptTokens: 1000, CachedTokens: cached})
	}
	f, err := FloorOf("w", res, cost)
	if err != nil {
		t.Fatal(err)
	}
	// TTFTs 30 + 0.25 x uncached ms: 280 (i=0), then 55, 80, ..., 255;
	// sorted 55..255, 280: p50 is the 5th (155), p90 the 9th (255), p99
	// the 10th (280). Hit rate: 4,500 cached of 10,000.
	if f.Requests != 10 || f.TTFTP50MS != 155 || f.TTFTP90MS != 255 || f.TTFTP99MS != 280 || f.HitRate != 0.45 {
		t.Fatalf("floor %+v", f)
	}
	var md bytes.Buffer
	if err := FloorMarkdown(&md, []Floor{f}); err != nil || !strings.Contains(md.String(), "| w | 10 | 155 / 255 / 280 | 45.0% |") {
		t.Fatalf("table %q, %v", md.String(), err)
	}

	// A floor over some of the requests bounds nothing: every failure or
	// missing report is an error that names the request.
	for name, bad := range map[string]replay.Result{
		"failed":         {Index: 3, Status: 500, Err: "boom"},
		"no usage":       {Index: 3, Status: 200},
		"no tokens":      {Index: 3, Status: 200, Usage: true},
		"cached > given": {Index: 3, Status: 200, Usage: true, PromptTokens: 10, CachedTokens: 11},
	} {
		r := append([]replay.Result(nil), res...)
		r[3] = bad
		if _, err := FloorOf("w", r, cost); err == nil || !strings.Contains(err.Error(), "request 3") {
			t.Errorf("%s: %v, want an error naming request 3", name, err)
		}
	}
	if _, err := FloorOf("w", nil, cost); err == nil {
		t.Error("no results: want an error")
	}
}
