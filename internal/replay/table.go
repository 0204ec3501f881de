package replay

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes s as a human-readable table: counts, rates, statuses
// and hit rate, then TTFT and E2E percentiles, then one line per instance
// (if any response named one).
func (s Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "requests\t%d sent: %d ok, %d failed, %d delayed by the concurrency cap\n", s.Requests, s.OK, s.Failed, s.Delayed)
	fmt.Fprintf(tw, "rate\ttarget %.2f QPS, achieved %.2f QPS, duration %s\n", s.TargetQPS, s.AchievedQPS, seconds(s.Duration))
	fmt.Fprintf(tw, "status\t%s\n", s.statusLine())
	if s.UsageReported > 0 {
		fmt.Fprintf(tw, "hit rate\t%.1f%% (cached / prompt tokens of the %d ok requests reporting usage)\n", 100*s.HitRate, s.UsageReported)
	} else {
		fmt.Fprintf(tw, "hit rate\tn/a (no usage reported)\n")
	}
	fmt.Fprintf(tw, "\nlatency (ok requests)\tp50\tp90\tp99\n")
	for _, row := range []struct {
		name string
		p    Percentiles
	}{{"TTFT", s.TTFT}, {"E2E", s.E2E}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.name, millis(row.p.P50), millis(row.p.P90), millis(row.p.P99))
	}
	if len(s.PerInstance) > 0 {
		fmt.Fprintf(tw, "\ninstance\trequests\tfailed\thit rate\tTTFT p50\n")
		for _, name := range slices.Sorted(maps.Keys(s.PerInstance)) {
			in := s.PerInstance[name]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%s\n", name, in.Requests, in.Failed, 100*in.HitRate, millis(in.TTFTP50))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("replay: writing table: %w", err)
	}
	return nil
}

// statusLine lists the request counts by status, e.g. "200 x98, 503 x2,
// no response x1".
func (s Summary) statusLine() string {
	if len(s.ByStatus) == 0 {
		return "-"
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(s.ByStatus)) {
		if code != 0 {
			parts = append(parts, fmt.Sprintf("%d x%d", code, s.ByStatus[code]))
		}
	}
	if n := s.ByStatus[0]; n > 0 {
		parts = append(parts, fmt.Sprintf("no response x%d", n))
	}
	return strings.Join(parts, ", ")
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}
