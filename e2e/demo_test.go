//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/peerbench"
)

// demoQPS is make demo's default rate: 82-90% of the demo stack's
// capacity, where round robin's TTFT p90 knees (scripts/demo.sh's header
// says how it was measured).
const demoQPS = 45

// TestDemo is make demo (scripts/demo.sh; a report, not a pass/fail
// test): the start of the conversation trace through the gateway-style
// Envoy (envoy/gateway-epp.yaml) to 4 `dualmap engine`s, picked by dualmap,
// by round robin (dualmap serve with policy round-robin) and, when
// DUALMAP_LLMD_EPP names its binary, by llm-d's endpoint picker, in turn,
// fresh engines per run; it prints a table per picker and writes it with a
// chart (TTFT percentiles, engine hit rate) into DEMO_OUT. With DEMO_SWEEP
// (rates) it instead runs DEMO_SWEEP_PICKERS at each rate and reports where
// the first one's TTFT p90 knees (peerbench.Knee): the capacity the
// default rate derives from. Knobs: DEMO_REQUESTS, DEMO_QPS,
// DEMO_SCALE_TOKENS, DEMO_MAX_OUTPUT, DEMO_TIME_SCALE, DEMO_RUNS, DEMO_TRACE,
// DEMO_OUT (scripts/demo.sh lists them with their defaults).
func TestDemo(t *testing.T) {
	if os.Getenv("DUALMAP_DEMO") == "" {
		t.Skip("set DUALMAP_DEMO=1 (make demo) to run the demo")
	}
	requests := envInt(t, "DEMO_REQUESTS", 600)
	scale := floats(t, "DEMO_SCALE_TOKENS", "0.25")[0]
	timeScale := floats(t, "DEMO_TIME_SCALE", "10")[0]
	maxOutput := envInt(t, "DEMO_MAX_OUTPUT", 32)
	runs := envInt(t, "DEMO_RUNS", 2)
	tracePath := cmpOr(os.Getenv("DEMO_TRACE"), filepath.Join(repoRoot, "..", "shared", "traces", "conversation_trace.jsonl"))
	out := os.Getenv("DEMO_OUT")
	if out == "" {
		// Not t.TempDir: the table and chart must outlive the test.
		dir, err := os.MkdirTemp("", "dualmap-demo")
		if err != nil {
			t.Fatal(err)
		}
		out = dir
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	w, err := peerbench.Conversation(tracePath, requests)
	if err != nil {
		t.Fatal(err)
	}
	w.Scale, w.MaxOutput = scale, maxOutput
	eng := peerEngines{kind: "dualmap", n: 4, timeScale: timeScale}
	client := peerClient{name: "replay", concurrency: 4096}
	all := map[string]benchPicker{
		"dualmap":     benchDualmap("dualmap", ""),
		"round-robin": benchDualmapPolicy("round-robin", "round-robin", ""),
	}
	if bin := os.Getenv("DUALMAP_LLMD_EPP"); bin != "" {
		all["llm-d"] = benchLLMD(bin)
	}
	pickers := func(key, def string) []benchPicker {
		var ps []benchPicker
		for _, name := range strings.Split(cmpOr(os.Getenv(key), def), ",") {
			pk, ok := all[strings.TrimSpace(name)]
			if !ok {
				t.Fatalf("%s: picker %q unknown or not available (dualmap, round-robin, llm-d with DUALMAP_LLMD_EPP)", key, name)
			}
			ps = append(ps, pk)
		}
		return ps
	}
	fmt.Printf("demo: %d requests of %s, tokens x%g, <= %d output tokens, 4 dualmap engines at %gx their profile's speed; load average %s\n",
		len(w.Trace.Requests), filepath.Base(tracePath), scale, maxOutput, timeScale, loadAvg())

	if v := os.Getenv("DEMO_SWEEP"); v != "" {
		demoSweep(t, eng, w, client, pickers("DEMO_SWEEP_PICKERS", "round-robin"), floats(t, "DEMO_SWEEP", v), out)
		return
	}
	qps := floats(t, "DEMO_QPS", fmt.Sprint(demoQPS))[0]
	def := "dualmap,round-robin"
	if _, ok := all["llm-d"]; ok {
		def += ",llm-d"
	}
	ps := pickers("DEMO_PICKERS", def)
	var rows []peerbench.Row
	for run := 1; run <= runs; run++ {
		for _, pk := range ps {
			row, _ := benchRun(t, eng, pk, 1, w, qps, client, peerbench.Row{Percent: 0, Run: run})
			queue := ""
			if q := row.Queue; q != nil {
				queue = fmt.Sprintf(", router queue held %d (mean wait %s ms)", q.Held, whole(q.MeanWaitMS))
			}
			fmt.Printf("  run %d %-12s %5.1f QPS: TTFT p50 %s p90 %s p99 %s ms, engine hit rate %.1f%%, busiest engine's prefill %.2fx the mean, %d failed%s [load %s]\n",
				run, pk.name, qps, whole(row.TTFTP50MS), whole(row.TTFTP90MS), whole(row.TTFTP99MS), 100*row.EngineHitRate, row.PrefillSkew(), row.Failed, queue, row.LoadAvg)
			if row.OK == 0 {
				t.Fatalf("%s: no request of %d served (%v): the stack does not work", pk.name, row.Requests, row.ByStatus)
			}
			rows = append(rows, row)
		}
	}
	var md bytes.Buffer
	if err := peerbench.PickerTable(&md, rows); err != nil {
		t.Fatal(err)
	}
	title := fmt.Sprintf("conversation trace, %d requests at %g QPS, 4 engines", len(w.Trace.Requests), qps)
	chart := filepath.Join(out, "demo.png")
	if err := peerbench.Chart(chart, title, rows); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.MarshalIndent(map[string]any{"qps": qps, "requests": len(w.Trace.Requests), "scale_tokens": scale, "time_scale": timeScale, "rows": rows}, "", "  ")
	for name, b := range map[string][]byte{"results.md": md.Bytes(), "results.json": raw} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("\n%s (runs comma-separated; load average %s)\n\n%s\nchart: %s\nresults: %s\n",
		title, loadAvg(), md.String(), chart, filepath.Join(out, "results.json"))
}

// demoSweep runs each picker at each rate once and reports the first
// picker's knee.
func demoSweep(t *testing.T, eng peerEngines, w peerbench.Workload, c peerClient, ps []benchPicker, rates []float64, out string) {
	var rows []peerbench.Row
	var points []peerbench.SweepPoint
	for _, qps := range rates {
		for i, pk := range ps {
			row, st := benchRun(t, eng, pk, 1, w, qps, c, peerbench.Row{Run: 1})
			fmt.Printf("  sweep %-12s %6.1f QPS (sent %.1f): TTFT p50 %s p90 %s p99 %s ms, E2E p50 %s ms, drift %.2f, hit %.1f%%, prefill skew %.2f, %d failed [load %s]\n",
				pk.name, qps, st.Sent, whole(row.TTFTP50MS), whole(row.TTFTP90MS), whole(row.TTFTP99MS), whole(row.E2EP50MS), st.Drift(), 100*row.EngineHitRate, row.PrefillSkew(), row.Failed, row.LoadAvg)
			rows = append(rows, row)
			if i == 0 {
				points = append(points, peerbench.SweepPoint{QPS: qps, TTFTP90MS: row.TTFTP90MS})
			}
		}
	}
	raw, _ := json.MarshalIndent(map[string]any{"sweep": rows}, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "sweep.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	capacity, knee, reached, err := peerbench.Knee(points, peerbench.KneeFactor)
	if err != nil {
		t.Fatal(err)
	}
	if !reached {
		fmt.Printf("sweep: %s's TTFT p90 stayed within %gx its value at %g QPS up to %g QPS: capacity at least that\n", ps[0].name, peerbench.KneeFactor, points[0].QPS, capacity)
		return
	}
	fmt.Printf("sweep: %s's TTFT p90 passes %gx its value at %g QPS at %g QPS: capacity %g QPS (85%%: %.1f); %s\n",
		ps[0].name, peerbench.KneeFactor, points[0].QPS, knee, capacity, 0.85*capacity, filepath.Join(out, "sweep.json"))
}

// whole formats milliseconds as a whole number.
func whole(v float64) string { return fmt.Sprintf("%.0f", v) }
