package peerbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// PickerRuns are the runs of one picker, in run order.
type PickerRuns struct {
	Picker string
	Rows   []Row
}

// ByPicker groups rows by picker, pickers in the order they first appear
// and each picker's rows sorted by Run.
func ByPicker(rows []Row) []PickerRuns {
	var out []PickerRuns
	for _, r := range rows {
		i := slices.IndexFunc(out, func(p PickerRuns) bool { return p.Picker == r.Picker })
		if i < 0 {
			out = append(out, PickerRuns{Picker: r.Picker})
			i = len(out) - 1
		}
		out[i].Rows = append(out[i].Rows, r)
	}
	for _, p := range out {
		slices.SortStableFunc(p.Rows, func(a, b Row) int { return a.Run - b.Run })
	}
	return out
}

// Spread is the mean, lowest and highest of one figure over a picker's
// runs.
type Spread struct{ Mean, Min, Max float64 }

// SpreadOf is the Spread of f over rows; the zero Spread for no rows.
func SpreadOf(rows []Row, f func(Row) float64) Spread {
	if len(rows) == 0 {
		return Spread{}
	}
	s := Spread{Min: f(rows[0]), Max: f(rows[0])}
	for _, r := range rows {
		v := f(r)
		s.Mean += v
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	}
	s.Mean /= float64(len(rows))
	return s
}

// PickerTable writes rows as a Markdown table with one line per picker and
// every run's figure in each cell, comma-separated in run order: rate,
// TTFT p50 / p90 / p99, E2E p50, the engines' prefix-cache hit rate, the
// failed requests and what the router queue held ("-" for a picker that
// does not report it).
func PickerTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| picker | QPS | TTFT p50 / p90 / p99 ms | E2E p50 ms | engine hit rate | failed | router queue: held (mean wait ms) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, p := range ByPicker(rows) {
		var qps, ttft, e2e, hit, fail, queue []string
		for _, r := range p.Rows {
			qps = append(qps, fmt.Sprintf("%.1f", r.QPS))
			ttft = append(ttft, thousands(r.TTFTP50MS)+" / "+thousands(r.TTFTP90MS)+" / "+thousands(r.TTFTP99MS))
			e2e = append(e2e, thousands(r.E2EP50MS))
			hit = append(hit, fmt.Sprintf("%.1f%%", 100*r.EngineHitRate))
			fail = append(fail, failed(r))
			if r.Queue == nil {
				queue = append(queue, "-")
			} else {
				queue = append(queue, fmt.Sprintf("%d (%s)", r.Queue.Held, thousands(r.Queue.MeanWaitMS)))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", p.Picker, strings.Join(slices.Compact(qps), ", "),
			strings.Join(ttft, ", "), strings.Join(e2e, ", "), strings.Join(hit, ", "), strings.Join(fail, ", "), strings.Join(queue, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
