package peerbench

import (
	"errors"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart writes a PNG to path with two panels side by side: TTFT p50, p90
// and p99 per picker, and the engines' prefix-cache hit rate per picker.
// Each bar is the mean over the picker's runs, and a whisker spans its
// lowest to highest run, so that the spread between runs shows.
func Chart(path, title string, rows []Row) error {
	pickers := ByPicker(rows)
	if len(pickers) == 0 {
		return errors.New("peerbench: chart: no rows")
	}
	ticks := make([]plot.Tick, len(pickers))
	for i, p := range pickers {
		ticks[i] = plot.Tick{Value: float64(i), Label: p.Picker}
	}

	ttft := plot.New()
	ttft.Title.Text = title
	ttft.Y.Label.Text = "TTFT (ms)"
	ttft.X.Tick.Marker = plot.ConstantTicks(ticks)
	ttft.Legend.Top, ttft.Legend.Left = true, true
	ttft.Add(plotter.NewGrid())
	pcts := []struct {
		name string
		f    func(Row) float64
	}{{"p50", func(r Row) float64 { return r.TTFTP50MS }}, {"p90", func(r Row) float64 { return r.TTFTP90MS }}, {"p99", func(r Row) float64 { return r.TTFTP99MS }}}
	const w = 0.26
	for k, pc := range pcts {
		b := &spreadBars{width: w, color: plotutil.Color(k)}
		for i, p := range pickers {
			b.x = append(b.x, float64(i)+(float64(k)-1)*w)
			b.s = append(b.s, SpreadOf(p.Rows, pc.f))
		}
		ttft.Add(b)
		ttft.Legend.Add("TTFT "+pc.name, b)
	}

	hit := plot.New()
	hit.Title.Text = "engine prefix-cache hit rate"
	hit.Y.Label.Text = "hit rate (% of prompt tokens)"
	hit.X.Tick.Marker = plot.ConstantTicks(ticks)
	hb := &spreadBars{width: 0.5, color: plotutil.Color(3)}
	for i, p := range pickers {
		hb.x = append(hb.x, float64(i))
		hb.s = append(hb.s, SpreadOf(p.Rows, func(r Row) float64 { return 100 * r.EngineHitRate }))
	}
	hit.Add(plotter.NewGrid(), hb)

	for _, p := range []*plot.Plot{ttft, hit} {
		p.X.Label.Text = "bar: mean of the runs; whisker: lowest to highest run"
		p.X.Min, p.X.Max = -0.6, float64(len(pickers))-0.4
		p.Y.Min = 0
		p.Y.Max *= 1.15 // room for the legend and whiskers
	}
	img := vgimg.New(12*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	cs := plot.Align([][]*plot.Plot{{ttft, hit}}, tiles, dc)
	ttft.Draw(cs[0][0])
	hit.Draw(cs[0][1])

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("peerbench: chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("peerbench: chart: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("peerbench: chart: %s: %w", path, err)
	}
	return nil
}

// spreadBars draws a bar per x at its Spread's mean, width wide in data
// units, with a whisker from the lowest to the highest value.
type spreadBars struct {
	x     []float64
	s     []Spread
	width float64
	color color.Color
}

func (b *spreadBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	line := draw.LineStyle{Color: color.Black, Width: vg.Points(0.75)}
	for i, x := range b.x {
		x0, x1 := trX(x-b.width/2), trX(x+b.width/2)
		y0, y1 := trY(0), trY(b.s[i].Mean)
		rect := c.ClipPolygonY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		c.FillPolygon(b.color, rect)
		c.StrokeLines(line, c.ClipLinesY(append(rect, rect[0]))...)
		if b.s[i].Max > b.s[i].Min {
			xm, tick := trX(x), (x1-x0)/4
			lo, hi := trY(b.s[i].Min), trY(b.s[i].Max)
			c.StrokeLine2(line, xm, lo, xm, hi)
			c.StrokeLine2(line, xm-tick, lo, xm+tick, lo)
			c.StrokeLine2(line, xm-tick, hi, xm+tick, hi)
		}
	}
}

func (b *spreadBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	if len(b.x) == 0 {
		return 0, 0, 0, 0
	}
	xmin, xmax = b.x[0]-b.width/2, b.x[0]+b.width/2
	for i, x := range b.x {
		xmin, xmax = min(xmin, x-b.width/2), max(xmax, x+b.width/2)
		ymax = max(ymax, b.s[i].Max, b.s[i].Mean)
	}
	return xmin, xmax, 0, ymax
}

func (b *spreadBars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(b.color, pts)
}
