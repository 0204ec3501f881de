package peerbench

import (
	"errors"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotutil"
)

func demoRows() []Row {
	return []Row{
		{Picker: "dualmap", Run: 2, QPS: 40, TTFTP50MS: 110, TTFTP90MS: 210, TTFTP99MS: 410, E2EP50MS: 300, EngineHitRate: 0.2, Queue: &QueueStats{Held: 12, MeanWaitMS: 3.4}},
		{Picker: "round-robin", Run: 1, QPS: 40, TTFTP50MS: 100, TTFTP90MS: 200, TTFTP99MS: 400, E2EP50MS: 1234, EngineHitRate: 0.05, Failed: 2, ByStatus: map[int]int{429: 1, 0: 1}},
		{Picker: "dualmap", Run: 1, QPS: 40, TTFTP50MS: 90, TTFTP90MS: 190, TTFTP99MS: 390, E2EP50MS: 280, EngineHitRate: 0.1, Queue: &QueueStats{Held: 0, MeanWaitMS: 0}},
		{Picker: "round-robin", Run: 2, QPS: 40, TTFTP50MS: 100, TTFTP90MS: 200, TTFTP99MS: 400, E2EP50MS: 1000, EngineHitRate: 0.05},
	}
}

func TestByPickerAndSpread(t *testing.T) {
	ps := ByPicker(demoRows())
	if len(ps) != 2 || ps[0].Picker != "dualmap" || ps[1].Picker != "round-robin" {
		t.Fatalf("ByPicker: %+v, want dualmap then round-robin (first seen)", ps)
	}
	if ps[0].Rows[0].Run != 1 || ps[0].Rows[1].Run != 2 {
		t.Fatalf("ByPicker: dualmap's runs %d, %d: want sorted by run", ps[0].Rows[0].Run, ps[0].Rows[1].Run)
	}
	s := SpreadOf(ps[0].Rows, func(r Row) float64 { return r.TTFTP50MS })
	if s != (Spread{Mean: 100, Min: 90, Max: 110}) {
		t.Fatalf("SpreadOf p50: %+v, want mean 100 in 90-110", s)
	}
	if (SpreadOf(nil, func(r Row) float64 { return 1 })) != (Spread{}) {
		t.Fatal("SpreadOf(no rows): want the zero Spread")
	}
}

func TestPickerTable(t *testing.T) {
	var b strings.Builder
	if err := PickerTable(&b, demoRows()); err != nil {
		t.Fatal(err)
	}
	want := "| picker | QPS | TTFT p50 / p90 / p99 ms | E2E p50 ms | engine hit rate | failed | router queue: held (mean wait ms) |\n" +
		"|---|---|---|---|---|---|---|\n" +
		"| dualmap | 40.0 | 90 / 190 / 390, 110 / 210 / 410 | 280, 300 | 10.0%, 20.0% | 0, 0 | 0 (0), 12 (3) |\n" +
		"| round-robin | 40.0 | 100 / 200 / 400, 100 / 200 / 400 | 1,234, 1,000 | 5.0%, 5.0% | 2 (1 x 0, 1 x 429), 0 | -, - |\n"
	if b.String() != want {
		t.Fatalf("PickerTable:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestKnee(t *testing.T) {
	pts := func(xy ...float64) []SweepPoint {
		var p []SweepPoint
		for i := 0; i < len(xy); i += 2 {
			p = append(p, SweepPoint{QPS: xy[i], TTFTP90MS: xy[i+1]})
		}
		return p
	}
	tests := []struct {
		name          string
		points        []SweepPoint
		capacity, at  float64
		reached, fail bool
	}{
		{name: "knee", points: pts(10, 200, 20, 220, 40, 390, 60, 900), capacity: 40, at: 60, reached: true},
		{name: "unsorted", points: pts(60, 900, 10, 200, 40, 390, 20, 220), capacity: 40, at: 60, reached: true},
		{name: "none", points: pts(10, 200, 20, 150, 30, 399), capacity: 30},
		{name: "at once", points: pts(10, 100, 20, 201, 30, 150), capacity: 10, at: 20, reached: true},
		{name: "one rate", points: pts(10, 100), fail: true},
		{name: "zero p90", points: pts(10, 100, 20, 0), fail: true},
	}
	for _, tt := range tests {
		c, k, r, err := Knee(tt.points, KneeFactor)
		if tt.fail {
			if err == nil {
				t.Errorf("%s: want an error", tt.name)
			}
			continue
		}
		if err != nil || c != tt.capacity || k != tt.at || r != tt.reached {
			t.Errorf("%s: Knee = %v, %v, %v, %v; want %v, %v, %v", tt.name, c, k, r, err, tt.capacity, tt.at, tt.reached)
		}
	}
	if _, _, _, err := Knee(pts(10, 1, 20, 2), 1); err == nil {
		t.Error("factor 1: want an error")
	}
}

// TestChart draws the demo's chart and reads its pixels back: the area of
// each percentile's bars follows its mean (p99's bars, 4x p50's values,
// cover about 4x the pixels), the hit-rate panel is drawn, and bad input
// gets an error.
func TestChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.png")
	if err := Chart(path, "test", demoRows()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("demo.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 300 {
		t.Fatalf("demo.png is %dx%d, want a two-panel chart", b.Dx(), b.Dy())
	}
	count := func(c color.Color) int {
		r0, g0, b0, _ := c.RGBA()
		n := 0
		bd := img.Bounds()
		for y := bd.Min.Y; y < bd.Max.Y; y++ {
			for x := bd.Min.X; x < bd.Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if r>>8 == r0>>8 && g>>8 == g0>>8 && b>>8 == b0>>8 {
					n++
				}
			}
		}
		return n
	}
	p50, p99, hit := count(plotutil.Color(0)), count(plotutil.Color(2)), count(plotutil.Color(3))
	if p50 < 100 || hit < 100 {
		t.Fatalf("p50 bars %d pixels, hit-rate bars %d: want both drawn", p50, hit)
	}
	if ratio := float64(p99) / float64(p50); ratio < 3 || ratio > 5 {
		t.Fatalf("p99 bars cover %d pixels, p50 bars %d (%.2fx): want about 4x, as their values", p99, p50, ratio)
	}
	if err := Chart(filepath.Join(t.TempDir(), "x.png"), "empty", nil); err == nil {
		t.Error("no rows: want an error")
	}
	if err := Chart(filepath.Join(t.TempDir(), "missing", "x.png"), "bad path", demoRows()); err == nil {
		t.Error("a path in a missing directory: want an error")
	}
}

const routerPage = `# TYPE dualmap_queue_wait_seconds histogram
dualmap_queue_wait_seconds_bucket{pool="default",le="0.005"} 590
dualmap_queue_wait_seconds_bucket{pool="default",le="0.01"} 595
dualmap_queue_wait_seconds_bucket{pool="default",le="+Inf"} 601
dualmap_queue_wait_seconds_sum{pool="default"} 1.5
dualmap_queue_wait_seconds_count{pool="default"} 601
dualmap_queue_wait_seconds_bucket{pool="batch",le="0.005"} 9
dualmap_queue_wait_seconds_bucket{pool="batch",le="+Inf"} 9
dualmap_queue_wait_seconds_sum{pool="batch"} 0.002
dualmap_queue_wait_seconds_count{pool="batch"} 9
dualmap_decisions_total{pool="default",policy="dualmap",reason="cache"} 400
`

func TestParseQueueStats(t *testing.T) {
	q, err := ParseQueueStats(strings.NewReader(routerPage))
	if err != nil {
		t.Fatal(err)
	}
	if q.Requests != 610 || q.Held != 11 || math.Abs(q.MeanWaitMS-1502.0/610) > 1e-9 {
		t.Fatalf("ParseQueueStats = %+v, want 11 held (610 counted, 599 within 5 ms) and a mean wait of 1,502 ms / 610", q)
	}
	if s := q.Add(QueueStats{Requests: 390, Held: 100, MeanWaitMS: 10}); s.Requests != 1000 || s.Held != 111 || math.Abs(s.MeanWaitMS-(1502.0+3900)/1000) > 1e-9 {
		t.Fatalf("Add = %+v, want 1,000 requests, 111 held, mean (1,502 + 3,900) / 1,000 ms", s)
	}
	if _, err := ParseQueueStats(strings.NewReader(vllmPage)); !errors.Is(err, ErrNoQueueMetrics) {
		t.Errorf("an engine's page: err %v, want ErrNoQueueMetrics", err)
	}
	for name, page := range map[string]string{
		"bad value":    "dualmap_queue_wait_seconds_sum x\n",
		"bad labels":   "dualmap_queue_wait_seconds_count{pool=\"a\" 3\n",
		"no value":     "dualmap_queue_wait_seconds_sum\n",
		"inconsistent": "dualmap_queue_wait_seconds_bucket{le=\"0.005\"} 5\ndualmap_queue_wait_seconds_sum 1\ndualmap_queue_wait_seconds_count 3\n",
		"negative sum": "dualmap_queue_wait_seconds_bucket{le=\"0.005\"} 1\ndualmap_queue_wait_seconds_sum -1\ndualmap_queue_wait_seconds_count 3\n",
	} {
		if _, err := ParseQueueStats(strings.NewReader(page)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func FuzzParseQueueStats(f *testing.F) {
	f.Add(routerPage)
	f.Add(vllmPage)
	f.Add("dualmap_queue_wait_seconds_bucket{le=\"0.005\"} 1e300\ndualmap_queue_wait_seconds_sum NaN\ndualmap_queue_wait_seconds_count +Inf\n")
	f.Fuzz(func(t *testing.T, page string) {
		if v, ok, err := ParseCounter(strings.NewReader(page), MetricPromptTokens); err == nil && !ok && v != 0 {
			t.Fatalf("ParseCounter(%q) = %v without a sample", page, v)
		}
		q, err := ParseQueueStats(strings.NewReader(page))
		if err == nil && (q.Held < 0 || q.Held > q.Requests || !(q.MeanWaitMS >= 0)) {
			t.Fatalf("ParseQueueStats(%q) = %+v: want held >= 0 and a mean wait >= 0", page, q)
		}
	})
}

func TestParseCounterAndSkew(t *testing.T) {
	page := vllmPage + "vllm:prompt_tokens_total{model_name=\"a\"} 300\nvllm:prompt_tokens_total_created 1.7e9\nvllm:prompt_tokens_total 100\n"
	v, ok, err := ParseCounter(strings.NewReader(page), MetricPromptTokens)
	if err != nil || !ok || v != 400 {
		t.Fatalf("ParseCounter = %v, %v, %v; want 400 (two label sets, not the _created series)", v, ok, err)
	}
	if _, ok, err := ParseCounter(strings.NewReader(vllmPage), MetricPromptTokens); ok || err != nil {
		t.Fatalf("a page without it: ok %v, err %v; want not ok and no error", ok, err)
	}
	if _, _, err := ParseCounter(strings.NewReader("vllm:prompt_tokens_total{a=\"b\" 3\n"), MetricPromptTokens); err == nil {
		t.Fatal("unterminated labels: want an error")
	}
	if s := (Row{EnginePrefill: []float64{100, 300, 200, 200}}).PrefillSkew(); s != 1.5 {
		t.Fatalf("PrefillSkew = %v, want 300 / 200 = 1.5", s)
	}
	if s := (Row{}).PrefillSkew(); s != 0 {
		t.Fatalf("PrefillSkew without figures = %v, want 0", s)
	}
}
