package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", ms(7), Percentiles{7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond}},
		{"two", ms(2, 1), Percentiles{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond}},
		{"hundred", ms(hundred...), Percentiles{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PercentilesOf(tt.in); got != tt.want {
				t.Errorf("PercentilesOf() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// sampleResults are four results: two ok on e0 and e1, one 503 on e0 and
// one with no response.
func sampleResults() []Result {
	return []Result{
		{Index: 0, Sent: 0, Status: 200, TTFT: 100 * time.Millisecond, E2E: 300 * time.Millisecond, Usage: true, PromptTokens: 100, CachedTokens: 50, Instance: "e0"},
		{Index: 1, Sent: time.Second, Status: 200, TTFT: 200 * time.Millisecond, E2E: 500 * time.Millisecond, Usage: true, PromptTokens: 300, CachedTokens: 0, Instance: "e1", Delayed: true},
		{Index: 2, Sent: 2 * time.Second, Status: 503, Err: "overloaded", E2E: 10 * time.Millisecond, Instance: "e0"},
		{Index: 3, Sent: 3 * time.Second, Err: "connection refused", E2E: time.Millisecond},
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(sampleResults())
	checks := []struct {
		name      string
		got, want any
	}{
		{"Requests", s.Requests, 4},
		{"OK", s.OK, 2},
		{"Failed", s.Failed, 2},
		{"Delayed", s.Delayed, 1},
		{"Duration", s.Duration, 3*time.Second + time.Millisecond},
		{"AchievedQPS", s.AchievedQPS, 1.0},
		{"TTFT", s.TTFT, Percentiles{100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		{"E2E.P50", s.E2E.P50, 300 * time.Millisecond},
		{"HitRate", s.HitRate, 0.125},
		{"UsageReported", s.UsageReported, 2},
		{"ByStatus", len(s.ByStatus), 3},
		{"ByStatus[0]", s.ByStatus[0], 1},
		{"PerInstance", len(s.PerInstance), 2},
		{"PerInstance[e0]", s.PerInstance["e0"], InstanceSummary{Requests: 2, OK: 1, Failed: 1, HitRate: 0.5, TTFTP50: 100 * time.Millisecond}},
		{"PerInstance[e1]", s.PerInstance["e1"], InstanceSummary{Requests: 1, OK: 1, HitRate: 0, TTFTP50: 200 * time.Millisecond}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("Summarize().%s = %v, want %v", c.name, c.got, c.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	tests := []struct {
		name    string
		s       Summary
		want    []string
		notWant []string
	}{
		{"full", Summarize(sampleResults()), []string{
			"4 sent: 2 ok, 2 failed, 1 delayed",
			"achieved 1.00 QPS",
			"status    200 x2, 503 x1, no response x1",
			"hit rate  12.5% (cached / prompt tokens of the 2 ok requests reporting usage)",
			"TTFT", "100.0ms", "200.0ms", "E2E", "300.0ms",
			"instance", "e0", "50.0%", "e1",
		}, nil},
		{"no usage, no instances", Summarize([]Result{{Status: 200, TTFT: time.Millisecond, E2E: time.Millisecond}}), []string{
			"hit rate  n/a", "1.0ms",
		}, []string{"instance"}},
		{"empty", Summary{}, []string{"0 sent", "status    -"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.s.WriteTable(&b); err != nil {
				t.Fatalf("WriteTable() error = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("WriteTable() lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(b.String(), w) {
					t.Errorf("WriteTable() has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	rs := sampleResults()
	s := Summarize(rs)
	s.TargetQPS = 2
	b, err := json.Marshal(map[string]any{"summary": s, "results": rs})
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	var got struct {
		Summary map[string]any   `json:"summary"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("json.Unmarshal() error = %v", err)
	}
	summaryKeys := map[string]any{
		"requests": 4.0, "ok": 2.0, "failed": 2.0, "delayed": 1.0, "duration_s": 3.001, "target_qps": 2.0, "achieved_qps": 1.0,
		"hit_rate": 0.125, "usage_reported": 2.0,
	}
	for k, want := range summaryKeys {
		if got.Summary[k] != want {
			t.Errorf("summary[%q] = %v, want %v", k, got.Summary[k], want)
		}
	}
	if ttft, _ := got.Summary["ttft"].(map[string]any); ttft["p50_s"] != 0.1 || ttft["p99_s"] != 0.2 {
		t.Errorf("summary[ttft] = %v, want p50_s 0.1, p99_s 0.2", got.Summary["ttft"])
	}
	if st, _ := got.Summary["by_status"].(map[string]any); st["503"] != 1.0 || st["0"] != 1.0 {
		t.Errorf("summary[by_status] = %v, want 503: 1, 0: 1", got.Summary["by_status"])
	}
	if e0, _ := got.Summary["per_instance"].(map[string]any)["e0"].(map[string]any); e0["hit_rate"] != 0.5 || e0["ttft_p50_s"] != 0.1 {
		t.Errorf("summary[per_instance][e0] = %v, want hit_rate 0.5, ttft_p50_s 0.1", e0)
	}
	if len(got.Results) != 4 {
		t.Fatalf("results = %d, want 4", len(got.Results))
	}
	r0, r2 := got.Results[0], got.Results[2]
	if r0["ttft_s"] != 0.1 || r0["e2e_s"] != 0.3 || r0["ok"] != true || r0["cached_tokens"] != 50.0 || r0["instance"] != "e0" {
		t.Errorf("results[0] = %v", r0)
	}
	if r2["status"] != 503.0 || r2["err"] != "overloaded" || r2["ok"] != false {
		t.Errorf("results[2] = %v, want status 503, err overloaded", r2)
	}
}
