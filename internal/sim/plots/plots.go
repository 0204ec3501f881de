// Package plots draws the charts of a simulator report (package sim) as PNG
// files, with gonum's plotting library. It is for the sim subcommand only:
// the router (serve) does not link it.
package plots

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/dualmap/dualmap/internal/sim"
)

// Write writes PNG charts of a report into dir (created if needed):
//   - attainment.png: SLO attainment vs QPS, one line per variant and queue mode;
//   - pareto.png: cache hit rate vs load CV (mean over the swept rates), the
//     paper's trade-off picture: up and to the left is better;
//   - ttft_cdf.png: TTFT CDF of every variant at the middle swept rate;
//   - load_timeline.png: per-instance load over time of the first run that
//     recorded a timeline (elastic scaling scenarios);
//   - attainment_over_time.png: SLO attainment by arrival time of every run
//     that recorded a timeline.
func Write(dir string, rep *sim.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: plots: %w", err)
	}
	groups := sim.ByVariant(rep.Runs)
	for _, f := range []func(string, *sim.Report, [][]*sim.Result) error{plotAttainment, plotPareto, plotCDF, plotTimeline, plotWindows} {
		if err := f(dir, rep, groups); err != nil {
			return fmt.Errorf("sim: plots: %w", err)
		}
	}
	return nil
}

func label(g []*sim.Result) string { return g[0].Policy + " / " + g[0].Queue }

func save(p *plot.Plot, dir, name string) error {
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

func plotAttainment(dir string, rep *sim.Report, groups [][]*sim.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("SLO attainment (TTFT <= %gs), %d instances", rep.SLOSeconds, rep.Instances)
	p.X.Label.Text = "request rate (QPS)"
	p.Y.Label.Text = "SLO attainment"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Left = true // bottom left: attainment is high there
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for i, g := range groups {
		qps, att := sim.AttainmentCurve(g)
		xy := make(plotter.XYs, len(qps))
		for k := range qps {
			xy[k].X, xy[k].Y = qps[k], att[k]
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		style(l, s, i)
		p.Add(l, s)
		p.Legend.Add(label(g), l, s)
	}
	p.Add(plotter.NewGrid())
	return save(p, dir, "attainment.png")
}

func plotPareto(dir string, rep *sim.Report, groups [][]*sim.Result) error {
	p := plot.New()
	p.Title.Text = "cache hit rate vs load imbalance (mean over swept rates)"
	p.X.Label.Text = "load CV (std/mean of per-instance pending prefill)"
	p.Y.Label.Text = "cache hit rate (tokens)"
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for i, g := range groups {
		var cv, hit float64
		for _, r := range g {
			cv += r.LoadCV
			hit += r.CacheHitRate
		}
		n := float64(len(g))
		s, err := plotter.NewScatter(plotter.XYs{{X: cv / n, Y: hit / n}})
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = plotutil.Color(i)
		s.GlyphStyle.Shape = plotutil.Shape(i)
		s.GlyphStyle.Radius = vg.Points(5)
		p.Add(s)
		p.Legend.Add(label(g), s)
	}
	if rep.UpperBoundHitRate > 0 {
		ub := plotter.NewFunction(func(float64) float64 { return rep.UpperBoundHitRate })
		ub.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(ub)
		p.Legend.Add("upper bound (infinite cache)", ub)
	}
	p.Add(plotter.NewGrid())
	return save(p, dir, "pareto.png")
}

func plotCDF(dir string, rep *sim.Report, groups [][]*sim.Result) error {
	var all []float64
	for _, r := range rep.Runs {
		all = append(all, r.QPS)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return nil
	}
	mid := all[len(all)/2]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("TTFT CDF at %.2f QPS", mid)
	p.X.Label.Text = "TTFT (s)"
	p.Y.Label.Text = "fraction of requests"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.TextStyle.Font.Size = vg.Points(8) // bottom right: the CDF is high there
	for i, g := range groups {
		var r *sim.Result
		for _, x := range g {
			if x.QPS == mid {
				r = x
				break
			}
		}
		if r == nil || len(r.TTFTs) == 0 {
			continue
		}
		step := max(1, len(r.TTFTs)/400)
		var xy plotter.XYs
		for k := 0; k < len(r.TTFTs); k += step {
			xy = append(xy, plotter.XY{X: r.TTFTs[k], Y: float64(k+1) / float64(len(r.TTFTs))})
		}
		xy = append(xy, plotter.XY{X: r.TTFTs[len(r.TTFTs)-1], Y: 1})
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(label(g), l)
	}
	p.Add(plotter.NewGrid())
	return save(p, dir, "ttft_cdf.png")
}

func plotTimeline(dir string, rep *sim.Report, groups [][]*sim.Result) error {
	var r *sim.Result
	for _, x := range rep.Runs {
		if len(x.Timeline) > 0 {
			r = x
			break
		}
	}
	if r == nil {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("per-instance load over time (%s / %s, %.2f QPS)", r.Policy, r.Queue, r.QPS)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "pending prefill + router-queued tokens"
	n := len(r.Timeline[len(r.Timeline)-1].Load)
	for i := 0; i < n; i++ {
		var xy plotter.XYs
		for _, s := range r.Timeline {
			if i < len(s.Load) {
				xy = append(xy, plotter.XY{X: s.T, Y: float64(s.Load[i])})
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		p.Add(l)
		if n <= 16 {
			p.Legend.Add(sim.InstanceName(i), l)
		}
	}
	p.Add(plotter.NewGrid())
	return save(p, dir, "load_timeline.png")
}

func style(l *plotter.Line, s *plotter.Scatter, i int) {
	c := plotutil.Color(i)
	l.Color = c
	l.Dashes = plotutil.Dashes(i / 7)
	l.Width = vg.Points(1.5)
	s.GlyphStyle.Color = c
	s.GlyphStyle.Shape = plotutil.Shape(i)
}

func plotWindows(dir string, rep *sim.Report, groups [][]*sim.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("SLO attainment by arrival time (%ds buckets)", sim.WindowSeconds)
	p.X.Label.Text = "arrival time (s)"
	p.Y.Label.Text = "SLO attainment"
	p.Y.Min, p.Y.Max = 0, 1.15 // room for the legend above the lines
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	n := 0
	for i, r := range rep.Runs {
		if len(r.Windows) == 0 {
			continue
		}
		var xy plotter.XYs
		for _, w := range r.Windows {
			if w.Requests > 0 {
				xy = append(xy, plotter.XY{X: w.Start, Y: w.Attainment})
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s / %s @ %.2f QPS", r.Policy, r.Queue, r.QPS), l)
		n++
	}
	if n == 0 {
		return nil
	}
	p.Add(plotter.NewGrid())
	return save(p, dir, "attainment_over_time.png")
}
