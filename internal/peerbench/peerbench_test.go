package peerbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/replay"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

const vllmPage = `# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="dualmap-sim"} 1822
vllm:prefix_cache_queries_total{engine="1",model_name="other"} 178
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="dualmap-sim"} 896
vllm:prefix_cache_hits_total{engine="1",model_name="other"} 104
vllm:prefix_cache_hits_created{engine="0"} 1.7e9
vllm:num_requests_running{model_name="dualmap-sim"} 3
`

func TestParseCacheCounters(t *testing.T) {
	c, err := ParseCacheCounters(strings.NewReader(vllmPage))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hits != 1000 || c.Queries != 2000 {
		t.Fatalf("got %+v, want hits 1000 (summed over label sets) and queries 2000", c)
	}
	before, _ := ParseCacheCounters(strings.NewReader("vllm:prefix_cache_hits_total 400\nvllm:prefix_cache_queries_total 1000\n"))
	d := c.Sub(before)
	if d.Hits != 600 || d.Queries != 1000 || math.Abs(d.HitRate()-0.6) > 1e-12 {
		t.Fatalf("delta %+v rate %v, want 600 of 1000", d, d.HitRate())
	}
	if got := (CacheCounters{1, 2}).Add(CacheCounters{3, 6}).HitRate(); got != 0.5 {
		t.Fatalf("summed hit rate %v, want 0.5", got)
	}
	if (CacheCounters{}).HitRate() != 0 {
		t.Fatal("no queries: want hit rate 0")
	}
	for _, page := range []string{"vllm:num_requests_running 1\n", "vllm:prefix_cache_queries_total 3\n", ""} {
		if _, err := ParseCacheCounters(strings.NewReader(page)); !errors.Is(err, ErrNoCacheCounters) {
			t.Errorf("%q: err %v, want ErrNoCacheCounters", page, err)
		}
	}
	for name, page := range map[string]string{
		"bad value":  "vllm:prefix_cache_hits_total{a=\"b\"} x\nvllm:prefix_cache_queries_total 3\n",
		"bad labels": "vllm:prefix_cache_hits_total{a=\"b\" 1\nvllm:prefix_cache_queries_total 3\n",
		"no value":   "vllm:prefix_cache_hits_total\nvllm:prefix_cache_queries_total 3\n",
	} {
		if _, err := ParseCacheCounters(strings.NewReader(page)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// steady is a ramp step of n requests, each taking e2e, every tenth a
// long one taking 5 x e2e, each lag later than the one before (a growing
// backlog) when lag > 0.
func steady(offered float64, n int, e2e, lag time.Duration) RampStep {
	st := RampStep{Offered: offered, Sent: offered, OK: n}
	for i := 0; i < n; i++ {
		took := e2e + time.Duration(i)*lag
		if i%10 == 9 {
			took = 5*e2e + time.Duration(i)*lag
		}
		st.E2E = append(st.E2E, took)
	}
	return st
}

func TestCapacity(t *testing.T) {
	keeps := steady(20, 300, time.Second, 0)
	if d := keeps.Drift(); d != 1 || !keeps.KeepsUp() {
		t.Fatalf("steady pool with a long tail: drift %v, want 1", d)
	}
	// Each request 5 ms later than the one before: 1.5 s behind after
	// 300 requests.
	behind := steady(40, 300, time.Second, 5*time.Millisecond)
	if d := behind.Drift(); d < MaxDrift || behind.KeepsUp() {
		t.Fatalf("growing backlog: drift %v, want > %v", d, MaxDrift)
	}
	failing := steady(30, 300, time.Second, 0)
	failing.Failed = 1
	ramp := []RampStep{steady(10, 300, time.Second, 0), keeps, behind, steady(60, 300, time.Second, 0), failing}
	rate, reached := Capacity(ramp)
	if rate != 20 || !reached {
		t.Fatalf("capacity %v reached %v, want 20 true (30 failed one request)", rate, reached)
	}
	if rate, reached := Capacity(ramp[:2]); rate != 20 || reached {
		t.Fatalf("all kept up: capacity %v reached %v, want 20 false (a lower bound)", rate, reached)
	}
	if rate, _ := Capacity(ramp[2:3]); rate != 0 {
		t.Fatalf("first step behind: capacity %v, want 0", rate)
	}
	// Too short to drift, but four times slower than the first step: a
	// queue in front of fast engines.
	short := steady(400, 300, 4*time.Second, 0)
	if !short.KeepsUp() {
		t.Fatal("no drift: KeepsUp alone cannot tell")
	}
	if rate, reached := Capacity([]RampStep{ramp[0], keeps, short}); rate != 20 || !reached {
		t.Fatalf("4x slower than the first step: capacity %v reached %v, want 20 true", rate, reached)
	}
	if SlowerThan(short, 0) || !SlowerThan(short, time.Second) || SlowerThan(keeps, time.Second) {
		t.Fatal("SlowerThan")
	}
	if (RampStep{OK: 3, E2E: []time.Duration{1, 2, 3}}).Drift() != 0 {
		t.Fatal("three requests: drift not defined, want 0")
	}
	r, err := RampRates(4, 1.5, 4)
	if err != nil || len(r) != 4 || r[0] != 4 || r[1] != 6 || r[3] != 13.5 {
		t.Fatalf("RampRates = %v, %v", r, err)
	}
	for _, bad := range [][3]float64{{0, 2, 3}, {1, 1, 3}, {1, 2, 0}, {math.Inf(1), 2, 3}} {
		if _, err := RampRates(bad[0], bad[1], int(bad[2])); err == nil {
			t.Errorf("RampRates%v: want an error", bad)
		}
	}
	rates, err := RatesAt(23, []float64{30, 70, 100, 150})
	if err != nil || len(rates) != 4 || rates[0] != 6.9 || rates[1] != 16.1 || rates[2] != 23 || rates[3] != 34.5 {
		t.Fatalf("RatesAt = %v, %v", rates, err)
	}
	if _, err := RatesAt(0, []float64{30}); err == nil {
		t.Error("capacity 0: want an error")
	}
	if _, err := RatesAt(10, []float64{-1}); err == nil {
		t.Error("negative percentage: want an error")
	}
}

func TestSharedPrefix(t *testing.T) {
	c := DefaultSharedPrefix()
	w, err := SharedPrefix(c)
	if err != nil {
		t.Fatal(err)
	}
	reqs := w.Trace.Requests
	if len(reqs) != 600 {
		t.Fatalf("%d requests, want 150 x 4", len(reqs))
	}
	sys := c.SystemTokens / c.BlockSize
	groups := map[uint64]int{}
	questions := map[uint64]bool{}
	for i, r := range reqs {
		if r.InputTokens != 2525 || len(r.Blocks) != sys+8 || r.OutputTokens != 64 {
			t.Fatalf("request %d: %d tokens in %d blocks, %d output", i, r.InputTokens, len(r.Blocks), r.OutputTokens)
		}
		if i > 0 && r.Arrival < reqs[i-1].Arrival {
			t.Fatalf("request %d arrives before %d", i, i-1)
		}
		groups[r.Blocks[0]]++
		for _, b := range r.Blocks[sys:] {
			if questions[b] {
				t.Fatalf("request %d: question block %x shared", i, b)
			}
			questions[b] = true
		}
	}
	if len(groups) != 150 {
		t.Fatalf("%d distinct system prompts, want 150", len(groups))
	}
	for g, n := range groups {
		if n != 4 {
			t.Fatalf("system prompt %x used %d times, want 4", g, n)
		}
	}
	// Same group, same system-prompt blocks; shuffled, not grouped.
	first := map[uint64][]uint64{}
	adjacent := 0
	for i, r := range reqs {
		if f, ok := first[r.Blocks[0]]; ok {
			for k := 0; k < sys; k++ {
				if f[k] != r.Blocks[k] {
					t.Fatalf("request %d: system block %d differs within its group", i, k)
				}
			}
		} else {
			first[r.Blocks[0]] = r.Blocks
		}
		if i > 0 && r.Blocks[0] == reqs[i-1].Blocks[0] {
			adjacent++
		}
	}
	if adjacent > 60 {
		t.Fatalf("%d of 599 neighbours share a group: not shuffled", adjacent)
	}
	w2, _ := SharedPrefix(c)
	if w2.Trace.Requests[17].Blocks[3] != reqs[17].Blocks[3] || w2.Trace.Requests[17].Arrival != reqs[17].Arrival {
		t.Fatal("same seed, different workload")
	}
	for name, bad := range map[string]SharedPrefixConfig{
		"no groups":     {PromptsPerGroup: 1, SystemTokens: 16, QuestionTokens: 1, BlockSize: 16},
		"ragged system": {Groups: 1, PromptsPerGroup: 1, SystemTokens: 17, QuestionTokens: 1, BlockSize: 16},
		"no question":   {Groups: 1, PromptsPerGroup: 1, SystemTokens: 16, BlockSize: 16},
		"no block size": {Groups: 1, PromptsPerGroup: 1, SystemTokens: 16, QuestionTokens: 1},
		"too many":      {Groups: 1 << 11, PromptsPerGroup: 1 << 11, SystemTokens: 16, QuestionTokens: 1, BlockSize: 16},
		"negative out":  {Groups: 1, PromptsPerGroup: 1, SystemTokens: 16, QuestionTokens: 1, BlockSize: 16, OutputTokens: -1},
	} {
		if _, err := SharedPrefix(bad); !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("%s: err %v, want ErrInvalidWorkload", name, err)
		}
	}
}

func TestToolAgentAndConversation(t *testing.T) {
	w, err := ToolAgent(200)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Trace.Requests) != 200 || w.Scale != 0.25 || w.MaxOutput != 64 || !strings.HasPrefix(w.Trace.Source, trace.GeneratedPrefix) {
		t.Fatalf("tool-agent: %d requests, scale %v, max output %d, source %q", len(w.Trace.Requests), w.Scale, w.MaxOutput, w.Trace.Source)
	}
	if _, err := ToolAgent(0); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("ToolAgent(0): %v", err)
	}
	path := filepath.Join(t.TempDir(), "t.jsonl")
	var buf bytes.Buffer
	if err := trace.Write(&buf, w.Trace); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.Bytes())
	c, err := Conversation(path, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Trace.Requests) != 50 || c.Scale != 0.25 || c.MaxOutput != 64 {
		t.Fatalf("conversation: %d requests, scale %v, max output %d", len(c.Trace.Requests), c.Scale, c.MaxOutput)
	}
	if _, err := Conversation(filepath.Join(t.TempDir(), "missing"), 5); err == nil {
		t.Error("missing trace: want an error")
	}
	if _, err := Conversation(path, 0); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("Conversation(0): %v", err)
	}
}

func TestExports(t *testing.T) {
	tr := &trace.Trace{BlockSize: 512, Requests: []trace.Request{
		{Arrival: 0, InputTokens: 1000, OutputTokens: 400, Blocks: []uint64{7, 8}},
		{Arrival: 2 * time.Second, InputTokens: 600, OutputTokens: 100, Blocks: []uint64{7, 9}},
		{Arrival: 4 * time.Second, InputTokens: 1, OutputTokens: 0, Blocks: []uint64{3}},
		// 10,753 tokens in 22 blocks of 512: 2,688 tokens in 21 of 128.
		{Arrival: 6 * time.Second, InputTokens: 10753, OutputTokens: 8, Blocks: seq(100, 22)},
	}}
	w := Workload{Name: "x", Trace: tr, Scale: 0.25, MaxOutput: 64}
	var mc bytes.Buffer
	bs, err := w.WriteMooncake(&mc, 2) // 2 requests/s: arrivals 0, 0.5 s, 1 s
	if err != nil {
		t.Fatal(err)
	}
	if bs != 128 {
		t.Fatalf("block size %d, want 512 x 0.25", bs)
	}
	back, err := trace.Read(bytes.NewReader(mc.Bytes()), trace.Options{Format: trace.FormatGeneric})
	if err != nil {
		t.Fatalf("%v\n%s", err, mc.String())
	}
	want := []trace.Request{
		{Arrival: 0, InputTokens: 250, OutputTokens: 64, Blocks: []uint64{7, 8}},
		{Arrival: 500 * time.Millisecond, InputTokens: 150, OutputTokens: 25, Blocks: []uint64{7, 9}},
		{Arrival: time.Second, InputTokens: 1, OutputTokens: 1, Blocks: []uint64{3}},
		{Arrival: 1500 * time.Millisecond, InputTokens: 2688, OutputTokens: 2, Blocks: seq(100, 21)},
	}
	if len(back.Requests) != len(want) {
		t.Fatalf("%d requests written, want %d", len(back.Requests), len(want))
	}
	for i, r := range back.Requests {
		if r.Arrival != want[i].Arrival || r.InputTokens != want[i].InputTokens || r.OutputTokens != want[i].OutputTokens || len(r.Blocks) != len(want[i].Blocks) {
			t.Fatalf("request %d: %+v, want %+v", i, r, want[i])
		}
	}
	if tr.Requests[0].InputTokens != 1000 || tr.Requests[1].Arrival != 2*time.Second {
		t.Fatal("WriteMooncake changed the workload")
	}
	var pr bytes.Buffer
	if err := w.WritePrompts(&pr, 2, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(pr.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d prompt lines, want %d", len(lines), len(want))
	}
	p := replay.NewPrompter(1, 512, 0.25)
	for i, l := range lines {
		var rec PromptRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.TimestampMS != float64(want[i].Arrival.Milliseconds()) || rec.MaxTokens != want[i].OutputTokens ||
			rec.Prompt != p.Prompt(want[i].Blocks, want[i].InputTokens) || len(rec.Prompt) != replay.BytesPerToken*want[i].InputTokens {
			t.Fatalf("line %d: %+v", i, rec)
		}
	}
	// The two prompts that share block 7 share its text.
	var a, b PromptRecord
	json.Unmarshal([]byte(lines[0]), &a)
	json.Unmarshal([]byte(lines[1]), &b)
	if a.Prompt[:p.BlockBytes()] != b.Prompt[:p.BlockBytes()] || a.Prompt[p.BlockBytes():len(b.Prompt)] == b.Prompt[p.BlockBytes():] {
		t.Fatal("shared first block, distinct second: prompts disagree")
	}
	if _, err := (Workload{Name: "empty", Trace: &trace.Trace{}}).WriteMooncake(&mc, 1); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("empty workload: %v", err)
	}
}

func TestRowsAndReport(t *testing.T) {
	results := []replay.Result{
		{Status: 200, TTFT: 100 * time.Millisecond, E2E: time.Second, CompletionTokens: 64, Usage: true},
		{Status: 200, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second, Sent: time.Second, CompletionTokens: 36, Usage: true},
		{Status: 429, Err: "busy", E2E: time.Millisecond},
		{Status: 0, Err: "connection refused"},
		{Status: 429, Err: "busy"},
	}
	sum := replay.Summarize(results)
	r := Row{Engine: "llmd-sim", Workload: "conversation", Picker: "dualmap", Replicas: 3, Percent: 70, QPS: 16.1, Run: 1, EngineHitRate: 0.123, LoadAvg: "3.1 2.0 1.5"}
	r.FromReplay(results, sum)
	if r.Requests != 5 || r.OK != 2 || r.Failed != 3 || r.ByStatus[429] != 2 || r.ByStatus[0] != 1 || r.ByStatus[200] != 0 {
		t.Fatalf("counts: %+v", r)
	}
	if r.TTFTP50MS != 100 || r.TTFTP99MS != 300 || r.E2EP50MS != 1000 || r.Duration != 3 || math.Abs(r.OutputTPS-100.0/3) > 1e-9 {
		t.Fatalf("figures: %+v", r)
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Row{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| llmd-sim | conversation | dualmap | 3 | 70% | 16.1 | 1 | 100 / 300 / 300 | 1,000 | 33 | 3 (1 x 0, 2 x 429) | 12.3% |", "| 3.1 2.0 1.5 |"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, md.String())
		}
	}
	if thousands(1234567.4) != "1,234,567" || thousands(999) != "999" {
		t.Fatal("thousands")
	}

	var c Row
	if err := c.FromClientJSON("aiperf says hi\n{\"ttft_p50_ms\": 12.5, \"ttft_p90_ms\": 20, \"ttft_p99_ms\": 31, \"e2e_p50_ms\": 800, \"output_tokens_per_s\": 950.5, \"requests\": 600, \"failed\": 2}\n"); err != nil {
		t.Fatal(err)
	}
	if c.TTFTP50MS != 12.5 || c.OK != 598 || c.Failed != 2 || c.OutputTPS != 950.5 {
		t.Fatalf("client row %+v", c)
	}
	for name, out := range map[string]string{
		"empty":     "",
		"not json":  "done\n",
		"missing":   `{"ttft_p50_ms": 1, "requests": 3, "failed": 0}`,
		"too many":  `{"ttft_p50_ms": 1, "ttft_p90_ms": 1, "ttft_p99_ms": 1, "e2e_p50_ms": 1, "output_tokens_per_s": 1, "requests": 3, "failed": 4}`,
		"json then": "{\"ttft_p50_ms\": 1}\nfinished",
	} {
		if err := c.FromClientJSON(out); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// seq returns n block ids from first on.
func seq(first uint64, n int) []uint64 {
	b := make([]uint64, n)
	for i := range b {
		b[i] = first + uint64(i)
	}
	return b
}
