package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable prints a report as readable tables: one row per variant,
// queue mode and rate (seeds averaged, attainment with its spread), then
// the goodput of each variant.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "trace %s: %d requests (first %d are warm-up), %d instances, profile %s, TTFT SLO %gs",
		rep.Trace, rep.Requests, rep.Warmup, rep.Instances, rep.Profile, rep.SLOSeconds)
	if rep.EngineModel != "" {
		fmt.Fprintf(w, ", engine model %s", rep.EngineModel)
		if rep.PrefillNoise > 0 {
			fmt.Fprintf(w, " with prefill noise %g", rep.PrefillNoise)
		}
	}
	if rep.Replicas > 1 {
		fmt.Fprintf(w, ", %d router replicas syncing every %s", rep.Replicas, rep.SyncInterval)
	}
	fmt.Fprintf(w, "\nupper-bound hit rate (infinite single cache, prompt tokens of measured requests): %.1f%%\n", 100*rep.UpperBoundHitRate)
	fmt.Fprintf(w, "at that hit rate the instances are busy all the time at %.2f QPS with prefill alone, %.2f QPS with decode too\n\n", rep.PrefillBoundQPS, rep.WorkBoundQPS)
	realistic := rep.EngineModel != ""
	head := "policy\tqueue\tqps\tSLO att.\tTTFT p50\tp90\tp99\tE2E p50\tp90\thit rate\tload CV\tmigr.\tfailed\tunfin.\t"
	if realistic {
		head += "preempt.\t"
	}
	fmt.Fprintln(tw, head)
	for _, g := range ByVariant(rep.Runs) {
		for i := 0; i < len(g); {
			j := i
			for j < len(g) && g[j].QPS == g[i].QPS {
				j++
			}
			row(tw, g[i:j], realistic)
			i = j
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ngoodput (highest QPS with >= 90% SLO attainment; ~ = interpolated between sweep points):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, gp := range rep.Goodput {
		mark := ""
		if gp.Interpolated {
			mark = "~"
		}
		note := ""
		if gp.Note != "" {
			note = "(" + gp.Note + ")"
		}
		if gp.Seeds != nil {
			note = strings.TrimSpace(fmt.Sprintf("single seeds %.2f-%.2f %s", gp.Seeds.Min, gp.Seeds.Max, note))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%.2f\t%s\n", gp.Policy, gp.Queue, mark, gp.QPS, note)
	}
	return tw.Flush()
}

func row(w io.Writer, rs []*Result, preemptions bool) {
	m := func(f func(*Result) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	att := m(func(r *Result) float64 { return r.SLOAttainment })
	attCol := fmt.Sprintf("%.1f%%", 100*att)
	if len(rs) > 1 {
		sd := 0.0
		for _, r := range rs {
			sd += (r.SLOAttainment - att) * (r.SLOAttainment - att)
		}
		attCol += fmt.Sprintf("±%.1f", 100*math.Sqrt(sd/float64(len(rs)-1)))
	}
	format := "%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%.2f\t%.0f\t%.0f\t%.0f\t"
	if preemptions {
		defer fmt.Fprintf(w, "%.0f\t\n", m(func(r *Result) float64 { return float64(r.Preemptions) }))
	} else {
		format += "\n"
	}
	fmt.Fprintf(w, format,
		rs[0].Policy, rs[0].Queue, rs[0].QPS, attCol,
		secs(m(func(r *Result) float64 { return r.TTFTP50 })),
		secs(m(func(r *Result) float64 { return r.TTFTP90 })),
		secs(m(func(r *Result) float64 { return r.TTFTP99 })),
		secs(m(func(r *Result) float64 { return r.E2EP50 })),
		secs(m(func(r *Result) float64 { return r.E2EP90 })),
		100*m(func(r *Result) float64 { return r.CacheHitRate }),
		m(func(r *Result) float64 { return r.LoadCV }),
		m(func(r *Result) float64 { return float64(r.Migrations) }),
		m(func(r *Result) float64 { return float64(r.Failed) }),
		m(func(r *Result) float64 { return float64(r.Unfinished) }))
}

func secs(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}
