package sim

import (
	"fmt"
	"io"

	"github.com/dualmap/dualmap/internal/sim/trace"
)

// PDSplit is one pool of a P/D sizing: Prefill and Decode instances, or a
// mixed pool of Mixed instances (Prefill and Decode 0).
type PDSplit struct {
	Prefill, Decode, Mixed int
}

func (s PDSplit) String() string {
	if s.Prefill == 0 && s.Decode == 0 {
		return fmt.Sprintf("%d mixed", s.Mixed)
	}
	return fmt.Sprintf("%dP+%dD", s.Prefill, s.Decode)
}

// PDRow is one run of a P/D sizing.
type PDRow struct {
	QPS    float64
	Split  PDSplit
	Policy string // as run: "dualmap + decode-capacity" for DualMap's P/D pools
	Result *Result
	Remote int // measured requests prefilled remotely (0 for a mixed pool)
}

// PDSizing runs tr at each rate through each split with each policy: a
// mixed pool with Simulate, a P/D pool with SimulatePD, DualMap over the
// prefill half with decode-capacity over the decode half, a baseline over
// both halves. base.Queue is QueueEngine for every run (SimulatePD has no
// router queue: the mixed pools get none either, so that placements are
// compared, not admission).
func PDSizing(tr *trace.Trace, rates []float64, base Options, splits []PDSplit, policies []string, pd PDOptions) ([]PDRow, error) {
	var rows []PDRow
	base.Queue = QueueEngine
	for _, qps := range rates {
		for _, sp := range splits {
			for _, pol := range policies {
				opt := base
				opt.Policy = pol
				row := PDRow{QPS: qps, Split: sp, Policy: pol}
				var err error
				if sp.Prefill == 0 && sp.Decode == 0 {
					opt.Instances = sp.Mixed
					row.Result, err = Simulate(tr, qps, opt)
				} else {
					p := pd
					p.Prefill, p.Decode = sp.Prefill, sp.Decode
					if pol == "dualmap" {
						row.Policy = "dualmap + decode-capacity"
					} else {
						p.DecodePolicy = pol
					}
					var pr *PDResult
					if pr, err = SimulatePD(tr, qps, opt, p); err == nil {
						row.Result, row.Remote = pr.Result, pr.Remote
					}
				}
				if err != nil {
					return nil, fmt.Errorf("sim: %s %s at %g QPS: %w", sp, pol, qps, err)
				}
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

// WritePDTable writes rows as a Markdown table.
func WritePDTable(w io.Writer, rows []PDRow) error {
	if _, err := fmt.Fprint(w, "| QPS | pool | policy | SLO attainment | TTFT p50 | TTFT p90 | E2E p50 | E2E p90 | hit rate | remote prefills |\n|---|---|---|---|---|---|---|---|---|---|\n"); err != nil {
		return err
	}
	for _, r := range rows {
		res := r.Result
		remote := "-"
		if r.Split.Prefill > 0 {
			remote = fmt.Sprintf("%.0f%%", 100*float64(r.Remote)/float64(max(res.Requests, 1)))
		}
		if _, err := fmt.Fprintf(w, "| %g | %s | %s | %.1f%% | %.2f s | %.2f s | %.1f s | %.1f s | %.1f%% | %s |\n", r.QPS, r.Split, r.Policy,
			100*res.SLOAttainment, res.TTFTP50, res.TTFTP90, res.E2EP50, res.E2EP90, 100*res.CacheHitRate, remote); err != nil {
			return err
		}
	}
	return nil
}
