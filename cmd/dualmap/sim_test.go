package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimCommandJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--generate", "requests=700,seed=3", "--qps", "1,2", "--policies", "dualmap,dualmap(choice=min-ttft),round-robin",
		"--queue", "router,paper", "--warmup", "100", "--instances", "4", "--json", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap sim exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "goodput") || !strings.Contains(stdout.String(), "dualmap(choice=min-ttft)") {
		t.Errorf("table lacks goodput or the ablation:\n%s", stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	for _, k := range []string{"trace", "requests", "instances", "profile", "slo_seconds", "upper_bound_hit_rate", "prefill_bound_qps", "work_bound_qps",
		"prefill_bound_90_qps", "work_bound_90_qps", "prefill_bound_50_qps", "work_bound_50_qps", "runs", "goodput"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	runs := rep["runs"].([]any)
	if len(runs) != 3*2*2 {
		t.Fatalf("runs = %d, want 12", len(runs))
	}
	for _, k := range []string{"policy", "queue", "qps", "completed", "failed", "slo_attainment", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "cache_hit_rate", "load_cv", "migrations"} {
		if _, ok := runs[0].(map[string]any)[k]; !ok {
			t.Errorf("run lacks %q", k)
		}
	}
	gp := rep["goodput"].([]any)
	if len(gp) != 6 {
		t.Errorf("goodput entries = %d, want 6", len(gp))
	}
}

func TestSimCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no trace", []string{"sim"}, "--trace FILE or --generate is required"},
		{"both", []string{"sim", "--trace", "x", "--generate", "default"}, "not both"},
		{"missing file", []string{"sim", "--trace", "/nonexistent/trace.jsonl"}, "no such file"},
		{"bad qps", []string{"sim", "--generate", "default", "--qps", "1,x"}, "not a positive number"},
		{"bad policy", []string{"sim", "--generate", "requests=50", "--qps", "1", "--policies", "nope", "--quiet"}, "unknown policy"},
		{"bad queue", []string{"sim", "--generate", "requests=50", "--qps", "1", "--queue", "fifo", "--quiet"}, "queue mode"},
		{"bad scale", []string{"sim", "--generate", "default", "--scale", "74:8"}, "time:instances"},
		{"bad gen key", []string{"sim", "--generate", "colour=red"}, "unknown key"},
		{"bad profile", []string{"sim", "--generate", "default", "--profile", "h100-dreams"}, "profile"},
		{"bad share", []string{"sim", "--generate", "shape=hot-prefix,prefix_share=1.5"}, "prefix_share"},
		{"zero on period", []string{"sim", "--generate", "arrival=onoff,on_s=0"}, "on_s"},
		{"bad slo mix", []string{"sim", "--generate", "slo_mix=2s:0.5/30s:0.6"}, "slo_mix"},
		{"bad index drop", []string{"sim", "--generate", "requests=50", "--qps", "1", "--index-drop", "1.5", "--quiet"}, "index_drop"},
		{"bad cost prior", []string{"sim", "--generate", "requests=50", "--qps", "1", "--cost-prior", "-3", "--quiet"}, "cost_prior"},
		{"bad index delay", []string{"sim", "--generate", "requests=50", "--qps", "1", "--index-delay", "-1s", "--quiet"}, "index_delay"},
		{"bad max running", []string{"sim", "--generate", "requests=50", "--qps", "1", "--max-running", "-1", "--quiet"}, "--max-running: queue.max_running must be >= 0"},
		{"max running not a number", []string{"sim", "--generate", "requests=50", "--qps", "1", "--max-running", "many", "--quiet"}, "-max-running: \"many\" is not an integer"},
		{"bad order", []string{"sim", "--generate", "requests=50", "--qps", "1", "--order", "fifo", "--quiet"}, "--order: queue.order must be"},
		{"bad oldest wait", []string{"sim", "--generate", "requests=50", "--qps", "1", "--oldest-wait", "soon", "--quiet"}, "-oldest-wait: \"soon\" is not a duration"},
		{"bad engine model", []string{"sim", "--generate", "requests=50", "--qps", "1", "--engine-model", "fast", "--quiet"}, "engine_model"},
		{"bad noise", []string{"sim", "--generate", "requests=50", "--qps", "1", "--prefill-noise", "20", "--quiet"}, "prefill_noise"},
		{"noise on legacy", []string{"sim", "--generate", "requests=50", "--qps", "1", "--engine-model", "legacy", "--prefill-noise", "0.2", "--quiet"}, "prefill_noise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) = %d, stderr %q, want non-zero and %q", tt.args, code, stderr.String(), tt.want)
			}
		})
	}
}

// TestSimCommandImperfect runs a generated workload with per-request SLOs
// and every imperfect-information flag, and checks that the report says so.
func TestSimCommandImperfect(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--generate", "shape=hot-prefix,requests=600,slo_mix=1s:0.5/30s:0.5", "--qps", "2", "--policies", "dualmap,dualmap-paper,preble",
		"--queue", "router", "--warmup", "100", "--instances", "4", "--cost-prior", "3", "--index-delay", "200ms", "--index-drop", "0.1",
		"--metrics-poll", "1s", "--json", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap sim exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{"imperfect information: cost_prior=3 index_delay=200ms index_drop=0.1 metrics_poll=1s", "prefill bound", "(90%)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Information string `json:"information"`
		Runs        []struct {
			Bound   float64 `json:"attainment_bound"`
			Classes []struct {
				SLO float64 `json:"slo_s"`
			} `json:"slo_classes"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Information == "" || len(rep.Runs) != 3 {
		t.Fatalf("report: %+v", rep)
	}
	for _, r := range rep.Runs {
		if r.Bound <= 0 || len(r.Classes) != 2 || r.Classes[0].SLO != 1 || r.Classes[1].SLO != 30 {
			t.Errorf("run: attainment bound %v, classes %+v", r.Bound, r.Classes)
		}
	}
}

func TestSimCommandMalformedTrace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.jsonl")
	good := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`
	if err := os.WriteFile(p, []byte(good+"\n{oops\n"+good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"sim", "--trace", p, "--quiet"}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "line 2") {
		t.Errorf("malformed trace: exit %d, stderr %q, want an error naming line 2", code, stderr.String())
	}
	stderr.Reset()
	code := run([]string{"sim", "--trace", p, "--skip-malformed", "--qps", "1", "--warmup", "0", "--policies", "dualmap", "--queue", "router", "--quiet"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "skipped 1 malformed") {
		t.Errorf("--skip-malformed: exit %d, stderr %q", code, stderr.String())
	}
}

func TestSimCommandSpreadTies(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ties.jsonl")
	var lines strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&lines, `{"timestamp": %d, "input_length": 600, "output_length": 5, "hash_ids": [%d, %d]}`+"\n", (i/6)*3000, i%3, 100+i)
	}
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--trace", path, "--spread-ties", "--qps", "2", "--policies", "dualmap", "--queue", "router",
		"--warmup", "0", "--instances", "2", "--json", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dualmap sim exited %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Trace    string
		Requests int
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rep.Trace, "(ties spread)") || rep.Requests != 60 {
		t.Errorf("report trace %q with %d requests, want the label \"(ties spread)\" and 60", rep.Trace, rep.Requests)
	}
}

// TestSimCommandEngineModels: the realistic model (default) reports
// preemptions, the legacy one does not, and noise changes the results.
func TestSimCommandEngineModels(t *testing.T) {
	sim := func(extra ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"sim", "--generate", "requests=600,seed=5", "--qps", "6", "--policies", "least-loaded",
			"--queue", "engine", "--warmup", "100", "--instances", "2", "--quiet"}, extra...)
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("dualmap sim %q exited %d: %s", extra, code, stderr.String())
		}
		return stdout.String()
	}
	realistic, legacy, noisy := sim(), sim("--engine-model", "legacy"), sim("--prefill-noise", "0.5")
	if !strings.Contains(realistic, "engine model realistic") || !strings.Contains(realistic, "preempt.") {
		t.Errorf("realistic table lacks the model or the preempt. column:\n%s", realistic)
	}
	if strings.Contains(legacy, "engine model") || strings.Contains(legacy, "preempt.") {
		t.Errorf("legacy table names a model or has a preempt. column:\n%s", legacy)
	}
	if !strings.Contains(noisy, "prefill noise 0.5") || noisy == realistic {
		t.Errorf("--prefill-noise 0.5 did not change the run:\n%s", noisy)
	}
}
