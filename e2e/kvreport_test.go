//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/peerbench"
	"github.com/dualmap/dualmap/internal/replay"
)

// TestKVEventsReport measures the router's cache view from KV events
// against its predicted index (issue 26, "Measure"): the conversation
// trace through Envoy to `dualmap engine`s whose KV cache is small enough
// that they evict, dualmap with and without pools[].kv_events, with one
// and three replicas (connect mode: every replica subscribes to every
// engine), each cell run DUALMAP_KV_REPORT_RUNS times on fresh engines. A
// report, not a pass/fail test: a Markdown table in the log and JSON rows
// in the output directory. Knobs: DUALMAP_KV_REPORT=1 (required),
// DUALMAP_KV_REPORT_REQUESTS (600), DUALMAP_KV_REPORT_QPS (8),
// DUALMAP_KV_REPORT_INSTANCES (4), DUALMAP_KV_REPORT_CACHE_TOKENS (49152
// per engine, GPU tier only), DUALMAP_KV_REPORT_REPLICAS (1,3),
// DUALMAP_KV_REPORT_MODES (predicted,events), DUALMAP_KV_REPORT_RUNS (2),
// DUALMAP_KV_REPORT_SLO_MS (goodput's TTFT bound, 500 ms wall),
// DUALMAP_PEER_TRACE, DUALMAP_KV_REPORT_OUT. DUALMAP_KV_REPORT_ENGINE=llmd-sim
// runs llm-d's simulator instead (DUALMAP_LLMD_SIM, its profile
// e2e/testdata/llmd-sim-profile.yaml with --kv-cache-size cut to the same
// tokens): it dials, so the router binds (through a relay that waits for
// it), and only one replica hears it; run it with one replica.
func TestKVEventsReport(t *testing.T) {
	if os.Getenv("DUALMAP_KV_REPORT") == "" {
		t.Skip("set DUALMAP_KV_REPORT=1 to measure KV events against the predicted index")
	}
	requests := envInt(t, "DUALMAP_KV_REPORT_REQUESTS", 600)
	qps := floats(t, "DUALMAP_KV_REPORT_QPS", "8")[0]
	n := envInt(t, "DUALMAP_KV_REPORT_INSTANCES", 4)
	cacheTokens := envInt(t, "DUALMAP_KV_REPORT_CACHE_TOKENS", 49152)
	runs := envInt(t, "DUALMAP_KV_REPORT_RUNS", 2)
	slo := time.Duration(floats(t, "DUALMAP_KV_REPORT_SLO_MS", "500")[0] * float64(time.Millisecond))
	tracePath := cmpOr(os.Getenv("DUALMAP_PEER_TRACE"), filepath.Join(repoRoot, "..", "shared", "traces", "conversation_trace.jsonl"))
	out := cmpOr(os.Getenv("DUALMAP_KV_REPORT_OUT"), filepath.Join(repoRoot, "out", "kvreport-"+time.Now().UTC().Format("20060102-150405")))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	w := benchWorkload(t, "conversation", tracePath, requests)
	eng := peerEngines{kind: cmpOr(os.Getenv("DUALMAP_KV_REPORT_ENGINE"), "dualmap"), n: n}
	var pool string
	// relay is where llm-d's simulators dial in events mode: a fresh relay
	// to a fresh bind port per run (set by setup).
	var relay string
	setup := func(mode string) {}
	switch eng.kind {
	case "dualmap":
		eng.args = kvReportEngineArgs(t, out, cacheTokens)
		pool = fmt.Sprintf("    kv_events: {enabled: true, port_offset: %d, replay_offset: %d}\n", kvOffset, kvOffset+1)
	case "llmd-sim":
		bin := os.Getenv("DUALMAP_LLMD_SIM")
		if bin == "" {
			t.Fatal("DUALMAP_KV_REPORT_ENGINE=llmd-sim needs DUALMAP_LLMD_SIM (scripts/llmd-sim.sh)")
		}
		profile := filepath.Join(repoRoot, "e2e", "testdata", "llmd-sim-profile.yaml")
		eng.args = func(i, port int) []string {
			args := []string{"env", "POD_IP=127.0.0.1", bin, "--config", profile, "--port", fmt.Sprint(port),
				"--kv-cache-size", fmt.Sprint(cacheTokens / 16),
				"--kv-events-replay-endpoint", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset+1)}
			if relay != "" {
				args = append(args, "--zmq-endpoint", "tcp://"+relay)
			}
			return args
		}
		setup = func(mode string) {
			relay, pool = "", ""
			if mode == "events" {
				bind := freePort(t)
				relay = startRelay(t, bind)
				pool = fmt.Sprintf("    kv_events: {enabled: true, mode: bind, bind: 'tcp://127.0.0.1:%d', replay_offset: %d}\n", bind, kvOffset+1)
			}
		}
	default:
		t.Fatalf("DUALMAP_KV_REPORT_ENGINE=%q: want dualmap or llmd-sim", eng.kind)
	}
	modes := map[string]func() benchPicker{
		"predicted": func() benchPicker { return benchDualmap("dualmap", "") },
		"events":    func() benchPicker { return benchDualmapPool("dualmap-kv", "", "", pool) },
	}
	var rows []kvReportRow
	t.Logf("== %s on %d %s engines of %d cached tokens each, %.1f requests/s; load average %s ==", w.Note, n, eng.kind, cacheTokens, qps, loadAvg())
	for _, f := range floats(t, "DUALMAP_KV_REPORT_REPLICAS", "1,3") {
		for run := 1; run <= runs; run++ {
			for _, mode := range strings.Split(cmpOr(os.Getenv("DUALMAP_KV_REPORT_MODES"), "predicted,events"), ",") {
				pk, ok := modes[strings.TrimSpace(mode)]
				if !ok {
					t.Fatalf("DUALMAP_KV_REPORT_MODES: unknown mode %q (predicted, events)", mode)
				}
				setup(strings.TrimSpace(mode))
				row := kvReportRun(t, eng, pk(), int(f), w, qps, slo)
				row.Mode, row.Run = strings.TrimSpace(mode), run
				rows = append(rows, row)
				t.Logf("%s", row.markdown())
				b, _ := json.MarshalIndent(map[string]any{"workload": w.Note, "instances": n, "cache_tokens": cacheTokens, "qps": qps, "slo_ms": slo.Milliseconds(), "rows": rows}, "", "  ")
				if err := os.WriteFile(filepath.Join(out, "results.json"), b, 0o644); err != nil {
					t.Errorf("results: %v", err)
				}
			}
		}
	}
	var md strings.Builder
	md.WriteString(kvReportHeader)
	for _, r := range rows {
		md.WriteString(r.markdown() + "\n")
	}
	os.WriteFile(filepath.Join(out, "results.md"), []byte(md.String()), 0o644)
	t.Logf("results in %s\n%s", out, md.String())
}

// kvReportEngineArgs runs `dualmap engine`s of the default profile with
// their GPU tier cut to cacheTokens tokens and no CPU tier, publishing KV
// events at their port plus kvOffset (replay one above).
func kvReportEngineArgs(t *testing.T, dir string, cacheTokens int) func(i, port int) []string {
	prof := map[string]any{
		"name": "kv-report", "engine_model": "realistic", "prefill_per_token_s": 0.00016, "decode_step_base_s": 0.03,
		"decode_per_seq_s": 0.0001, "decode_per_context_token_s": 9.3e-08, "kv_bytes_per_token": 57344,
		"hbm_cache_bytes": 57344 * cacheTokens, "dram_cache_bytes": 0, "max_batched_tokens": 20480,
		"max_num_seqs": 256, "max_model_len": 20480, "block_size": 16,
	}
	b, _ := json.Marshal(prof)
	path := filepath.Join(dir, "kv-report-profile.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return func(i, port int) []string {
		for _, p := range []int{port + kvOffset, port + kvOffset + 1} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("KV-event port %d of engine %d not free: %v", p, i, err)
			}
			l.Close()
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		return []string{dualmapBin, "engine", "--listen", addr, "--time-scale", fmt.Sprint(replaySpeed), "--name", addr, "--block-size", "16",
			"--profile", path,
			"--kv-events", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset), "--kv-events-mode", "bind",
			"--kv-events-replay", fmt.Sprintf("tcp://127.0.0.1:%d", port+kvOffset+1)}
	}
}

// A kvReportRow is one run's figures.
type kvReportRow struct {
	Engine   string  `json:"engine"`
	Mode     string  `json:"mode"` // predicted or events
	Replicas int     `json:"replicas"`
	Run      int     `json:"run"`
	LoadAvg  string  `json:"load_avg"`
	Requests int     `json:"requests"`
	OK       int     `json:"ok"`
	Failed   int     `json:"failed"`
	Duration float64 `json:"duration_s"`
	// EngineHitRate is the engines' own prefix-cache hit rate over the run.
	EngineHitRate float64 `json:"engine_hit_rate"`
	TTFTP50MS     float64 `json:"ttft_p50_ms"`
	TTFTP90MS     float64 `json:"ttft_p90_ms"`
	// Goodput is the requests per second served with TTFT within the SLO.
	Goodput float64 `json:"goodput_rps"`
	// From the replicas' /metrics, summed: responses that reported the
	// engine's cached tokens, those tokens, the tokens the router
	// predicted for them, the responses predicted with more than reported
	// (and the excess), and those predicted cached with none reported.
	Reports         float64 `json:"usage_reports"`
	ReportedTokens  float64 `json:"engine_cached_tokens"`
	PredictedTokens float64 `json:"predicted_cached_tokens"`
	Overclaims      float64 `json:"overclaims"`
	OverclaimTokens float64 `json:"overclaimed_tokens"`
	Misses          float64 `json:"predicted_misses"`
	// ExactInstances is dualmap_kv_events_exact_instances at the end,
	// summed over replicas; Stored and Removed the KV-event blocks.
	ExactInstances float64 `json:"exact_instances"`
	Stored         float64 `json:"kv_blocks_stored"`
	Removed        float64 `json:"kv_blocks_removed"`
}

const kvReportHeader = "| engine | mode | replicas | run | load | ok/sent | engine hit rate | TTFT p50 ms | TTFT p90 ms | goodput req/s | predicted/reported cached tokens | overclaimed responses | overclaimed tokens | predicted-hit-engine-none | exact views | event blocks stored/removed |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"

func (r kvReportRow) markdown() string {
	ratio, over, miss := 0.0, 0.0, 0.0
	if r.ReportedTokens > 0 {
		ratio = r.PredictedTokens / r.ReportedTokens
	}
	if r.Reports > 0 {
		over, miss = 100*r.Overclaims/r.Reports, 100*r.Misses/r.Reports
	}
	overTok := 0.0
	if r.PredictedTokens > 0 {
		overTok = 100 * r.OverclaimTokens / r.PredictedTokens
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %s | %d/%d | %.1f%% | %.0f | %.0f | %.2f | %.3f | %.1f%% | %.1f%% of predicted | %.1f%% | %.0f | %.0f/%.0f |",
		r.Engine, r.Mode, r.Replicas, r.Run, strings.Fields(r.LoadAvg + " ?")[0], r.OK, r.Requests, 100*r.EngineHitRate, r.TTFTP50MS, r.TTFTP90MS, r.Goodput,
		ratio, over, overTok, miss, r.ExactInstances, r.Stored, r.Removed)
}

// kvReportRun is one run on a fresh stack.
func kvReportRun(t *testing.T, eng peerEngines, pk benchPicker, replicas int, w peerbench.Workload, qps float64, slo time.Duration) kvReportRow {
	t.Helper()
	b := startBenchStack(t, eng, pk, replicas)
	defer b.stop()
	row := kvReportRow{Engine: eng.kind, Replicas: replicas, LoadAvg: loadAvg()}
	c0, _, _ := b.cacheCounters(t)
	before := b.routerSums(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, sum, err := replay.Run(ctx, w.Trace, replay.Options{URL: b.url, QPS: qps, Stream: true, Concurrency: 4096,
		MaxOutput: w.MaxOutput, ScaleTokens: w.Scale, Seed: replaySeed, Model: "dualmap-sim", IgnoreEOS: true})
	if err != nil {
		t.Fatalf("%s x%d: %v", pk.name, replicas, err)
	}
	c1, reported, _ := b.cacheCounters(t)
	if reported == 0 {
		t.Fatalf("no engine published %s", peerbench.MetricPrefixQueries)
	}
	row.EngineHitRate = c1.Sub(c0).HitRate()
	row.Requests, row.OK, row.Failed, row.Duration = sum.Requests, sum.OK, sum.Failed, sum.Duration.Seconds()
	row.TTFTP50MS, row.TTFTP90MS = peerbench.MS(sum.TTFT.P50), peerbench.MS(sum.TTFT.P90)
	good := 0
	for _, r := range res {
		if r.OK() && r.TTFT <= slo {
			good++
		}
	}
	if row.Duration > 0 {
		row.Goodput = float64(good) / row.Duration
	}
	// The last responses' usage is recorded as their bodies end: wait
	// until every replica has counted every served request.
	var after map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = b.routerSums(t)
		if after["dualmap_engine_usage_reports_total"]-before["dualmap_engine_usage_reports_total"] >= float64(row.OK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	d := func(k string) float64 { return after[k] - before[k] }
	row.Reports, row.ReportedTokens, row.PredictedTokens = d("dualmap_engine_usage_reports_total"), d("dualmap_engine_cached_tokens_total"), d("dualmap_predicted_cached_tokens_total")
	row.Overclaims, row.OverclaimTokens, row.Misses = d("dualmap_predicted_cache_overclaims_total"), d("dualmap_predicted_cache_overclaimed_tokens_total"), d("dualmap_predicted_cache_misses_total")
	row.ExactInstances = after["dualmap_kv_events_exact_instances"]
	row.Stored, row.Removed = after[`dualmap_kv_event_blocks_total{outcome="stored"`], after[`dualmap_kv_event_blocks_total{outcome="removed"`]
	return row
}

// routerSums sums, over the replicas and every label set, the router
// series kvReportRun reads; KV-event blocks are kept by outcome.
func (b *benchStack) routerSums(t *testing.T) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, r := range b.routers {
		resp, err := http.Get("http://" + r.admin + "/metrics")
		if err != nil {
			t.Fatalf("router %s /metrics: %v", r.admin, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			name, labels, _ := strings.Cut(k, "{")
			if name == "dualmap_kv_event_blocks_total" {
				for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
					if strings.HasPrefix(l, "outcome=") {
						name += "{" + l
					}
				}
			}
			sums[name] += f
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("router %s /metrics: %v", r.admin, err)
		}
	}
	return sums
}
