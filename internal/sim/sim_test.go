package sim

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/sim/trace"
	"github.com/dualmap/dualmap/scheduler"
)

func smallTrace(t testing.TB, n int) *trace.Trace {
	t.Helper()
	tr, err := trace.Generate(trace.GenConfig{Seed: 7, Requests: n, QPS: 2, MaxInputTokens: 8192})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSimulateConservesRequests(t *testing.T) {
	tr := smallTrace(t, 800)
	for _, policy := range scheduler.Policies() {
		for _, q := range []string{QueueRouter, QueueEngine} {
			t.Run(policy+"/"+q, func(t *testing.T) {
				res, err := Simulate(tr, 2, Options{Policy: policy, Queue: q, Instances: 4, Warmup: 100})
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Completed + res.Failed + res.Unfinished; got != res.Requests || res.Requests != 700 {
					t.Errorf("completed+failed+unfinished = %d, requests = %d, want both 700", got, res.Requests)
				}
				if res.Completed != res.Requests {
					t.Errorf("Completed = %d at light load, want all %d", res.Completed, res.Requests)
				}
				// The lowest TTFT is at least the prefill of one uncached token.
				if res.TTFTs[0] <= 0 {
					t.Errorf("min TTFT = %v, want > 0", res.TTFTs[0])
				}
				if res.CacheHitRate <= 0 || res.CacheHitRate >= 1 {
					t.Errorf("CacheHitRate = %v, want in (0, 1)", res.CacheHitRate)
				}
				depths := 0
				for _, n := range res.KeyDepths {
					depths += n
				}
				if depths != res.Requests {
					t.Errorf("key-depth histogram counts %d requests, want %d", depths, res.Requests)
				}
			})
		}
	}
}

func TestSimulateOverloadCountsMisses(t *testing.T) {
	tr := smallTrace(t, 600)
	res, err := Simulate(tr, 200, Options{Policy: "round-robin", Instances: 2, Warmup: -1, Horizon: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unfinished == 0 || res.SLOAttainment > 0.5 {
		t.Errorf("at 200 QPS on 2 instances: unfinished=%d attainment=%.2f, want misses", res.Unfinished, res.SLOAttainment)
	}
	if got := res.Completed + res.Failed + res.Unfinished; got != res.Requests {
		t.Errorf("completed+failed+unfinished = %d, want %d", got, res.Requests)
	}
	if math.IsNaN(res.TTFTP99) || res.TTFTP99 < res.TTFTP50 {
		t.Errorf("TTFT p50=%v p99=%v, want finite and ordered", res.TTFTP50, res.TTFTP99)
	}
}

func TestSimulateDeterministic(t *testing.T) {
	tr := smallTrace(t, 500)
	o := Options{Instances: 4, Replicas: 2, SyncInterval: 500 * time.Millisecond, Seed: 3, Warmup: 100}
	a, err := Simulate(tr, 3, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(tr, 3, o)
	if a.Requests != 400 || a.SLOAttainment != b.SLOAttainment || a.CacheHitRate != b.CacheHitRate || a.TTFTP90 != b.TTFTP90 {
		t.Errorf("two identical runs differ: %+v vs %+v", a, b)
	}
}

// Replicas that exchange state keep more cache affinity than replicas that
// never do.
func TestReplicasShareState(t *testing.T) {
	tr := smallTrace(t, 1500)
	run := func(sync time.Duration) *Result {
		r, err := Simulate(tr, 2, Options{Instances: 8, Replicas: 3, SyncInterval: sync, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	synced, alone := run(200*time.Millisecond), run(0)
	single, err := Simulate(tr, 2, Options{Instances: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hit rate: 1 replica %.3f, 3 synced %.3f, 3 independent %.3f", single.CacheHitRate, synced.CacheHitRate, alone.CacheHitRate)
	if synced.CacheHitRate < alone.CacheHitRate {
		t.Errorf("synced hit rate %.3f < independent %.3f", synced.CacheHitRate, alone.CacheHitRate)
	}
}

func TestElasticScaling(t *testing.T) {
	tr := smallTrace(t, 1200)
	res, err := Simulate(tr, 4, Options{Instances: 4, Scale: []ScaleStep{{At: 60 * time.Second, Instances: 8}}, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timeline) == 0 {
		t.Fatal("no timeline recorded")
	}
	last := res.Timeline[len(res.Timeline)-1]
	if len(last.Load) != 8 {
		t.Errorf("timeline has %d instances at the end, want 8", len(last.Load))
	}
	busyNew := false
	for _, s := range res.Timeline {
		for i := 4; i < len(s.Load); i++ {
			busyNew = busyNew || s.Load[i] > 0
		}
	}
	if !busyNew {
		t.Error("instances added at 60s never received work")
	}
}

func TestOptionsValidate(t *testing.T) {
	tr := smallTrace(t, 50)
	bad := []Options{
		{Queue: "fifo"},
		{Instances: -1},
		{Policy: "nope"},
		{Scale: []ScaleStep{{At: time.Second, Instances: 0}}},
	}
	for _, o := range bad {
		if _, err := Simulate(tr, 1, o); err == nil {
			t.Errorf("Simulate(%+v) error = nil, want one", o)
		}
	}
	if _, err := Simulate(&trace.Trace{}, 1, Options{}); err == nil {
		t.Error("Simulate(empty trace) error = nil")
	}
}

func TestParseSpec(t *testing.T) {
	paper := scheduler.Params{"headroom": "0.5", "hopeless": "load", "tie": "0", "overflow": "none", "home": "0", "reach": "0"}
	paperSettings := []Setting{{"candidates", "2"}, {"split", "2"}, {"merge", "1"}, {"window", "200"}, {"learn", "-1"}}
	tests := []struct {
		in      string
		want    Spec
		wantErr bool
	}{
		{in: "dualmap", want: Spec{Label: "dualmap", Policy: "dualmap"}},
		{in: "dualmap(choice=min-ttft,candidates=3)", want: Spec{Label: "dualmap(choice=min-ttft,candidates=3)", Policy: "dualmap", Params: scheduler.Params{"choice": "min-ttft"}, Settings: []Setting{{"candidates", "3"}}}},
		{in: "dualmap(key_depth=2,budget=4096)", want: Spec{Label: "dualmap(key_depth=2,budget=4096)", Policy: "dualmap", Params: scheduler.Params{}, Settings: []Setting{{"key_depth", "2"}}, Budget: 4096}},
		{in: "dualmap-paper", want: Spec{Label: "dualmap-paper", Policy: "dualmap", Params: paper, Settings: paperSettings, Budget: -1, RebalanceSLO: 0.5, PrefillLoad: true, NoReplicas: true}},
		{in: "dualmap-paper(rebalance=false)", want: Spec{Label: "dualmap-paper(rebalance=false)", Policy: "dualmap", Params: scheduler.Params{"headroom": "0.5", "hopeless": "load", "tie": "0", "overflow": "none", "home": "0", "reach": "0", "rebalance": "false"}, Settings: paperSettings, Budget: -1, RebalanceSLO: 0.5, PrefillLoad: true, NoReplicas: true}},
		{in: "dualmap(learn=-1,oldest_wait=2)", want: Spec{Label: "dualmap(learn=-1,oldest_wait=2)", Policy: "dualmap", Params: scheduler.Params{}, Settings: []Setting{{"learn", "-1"}, {"oldest_wait", "2"}}}},
		{in: "dualmap(learn=fast)", wantErr: true},
		{in: "preble(max_running=-1)", want: Spec{Label: "preble(max_running=-1)", Policy: "preble", Params: scheduler.Params{}, Settings: []Setting{{"max_running", "-1"}}}},
		{in: "dualmap(split=2,merge=0.5,window=500,order=cache,late=serve)", want: Spec{Label: "dualmap(split=2,merge=0.5,window=500,order=cache,late=serve)", Policy: "dualmap", Params: scheduler.Params{},
			Settings: []Setting{{"split", "2"}, {"merge", "0.5"}, {"window", "500"}, {"order", "cache"}, {"late", "serve"}}}},
		{in: "dualmap(choice)", wantErr: true},
		{in: "dualmap(candidates=x)", wantErr: true},
		{in: "dualmap(oldest_wait=soon)", wantErr: true},
		{in: "(a=b)", wantErr: true},
		{in: "dualmap(a=b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSpec(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseSpec(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseSpec(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestSpecSettings: every spelling a spec accepted before the settings
// table reaches the same scheduler field as before, and a later key wins
// over the preset's.
func TestSpecSettings(t *testing.T) {
	tests := []struct {
		spec string
		want func(c scheduler.Config) bool
	}{
		{"dualmap(candidates=3)", func(c scheduler.Config) bool { return c.Candidates == 3 }},
		{"dualmap(key_depth=2)", func(c scheduler.Config) bool { return c.KeyDepth.Fixed == 2 }},
		{"dualmap(split=2)", func(c scheduler.Config) bool { return c.KeyDepth.SplitFactor == 2 }},
		{"dualmap(merge=0.25)", func(c scheduler.Config) bool { return c.KeyDepth.MergeFactor == 0.25 }},
		{"dualmap(window=300)", func(c scheduler.Config) bool { return c.KeyDepth.Window == 300 }},
		{"dualmap(order=cache)", func(c scheduler.Config) bool { return c.Queue.Order == scheduler.OrderCache }},
		{"dualmap(late=reject)", func(c scheduler.Config) bool { return c.Queue.Late == scheduler.LateReject }},
		{"dualmap(oldest_wait=2)", func(c scheduler.Config) bool { return c.Rebalance.OldestWait == 2*time.Second }},
		{"dualmap(oldest_wait=1.5)", func(c scheduler.Config) bool { return c.Rebalance.OldestWait == 1500*time.Millisecond }},
		{"dualmap(learn=-1)", func(c scheduler.Config) bool { return c.Cost.LearnRate == -1 }},
		{"dualmap(max_running=64)", func(c scheduler.Config) bool { return c.Queue.MaxRunning == 64 }},
		{"dualmap-paper", func(c scheduler.Config) bool {
			return c.Candidates == 2 && c.KeyDepth.SplitFactor == 2 && c.KeyDepth.MergeFactor == 1 && c.KeyDepth.Window == 200 && c.Cost.LearnRate == -1
		}},
		{"dualmap-paper(candidates=3)", func(c scheduler.Config) bool { return c.Candidates == 3 && c.KeyDepth.Window == 200 }},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			sp, err := ParseSpec(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if c := sp.apply(Options{}).Scheduler; !tt.want(c) {
				t.Errorf("ParseSpec(%q).apply().Scheduler = %+v", tt.spec, c)
			}
		})
	}
}

func TestGoodput(t *testing.T) {
	mk := func(qps, att float64) *Result {
		return &Result{Policy: "p", Queue: "router", QPS: qps, SLOAttainment: att}
	}
	tests := []struct {
		name     string
		runs     []*Result
		want     float64
		interp   bool
		wantNote string
	}{
		{"interpolated", []*Result{mk(1, 1), mk(2, 0.95), mk(3, 0.85)}, 2.5, true, ""},
		{"exact", []*Result{mk(1, 1), mk(2, 0.9), mk(3, 0.5)}, 2, false, ""},
		{"never", []*Result{mk(1, 0.5), mk(2, 0.4)}, 0, false, "below the lowest point"},
		{"always", []*Result{mk(1, 1), mk(2, 0.99)}, 2, false, "at or above the highest point"},
		{"seeds averaged", []*Result{mk(1, 1), mk(2, 1), mk(2, 0.8), mk(3, 0.2)}, 2, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := goodputs(tt.runs, 0.9)
			if len(g) != 1 || math.Abs(g[0].QPS-tt.want) > 1e-9 || g[0].Interpolated != tt.interp || g[0].Note != tt.wantNote {
				t.Errorf("goodputs() = %+v, want qps %v interpolated %v note %q", g, tt.want, tt.interp, tt.wantNote)
			}
		})
	}
}

func TestGoodputSeedSpread(t *testing.T) {
	mk := func(seed uint64, qps, att float64) *Result {
		return &Result{Policy: "p", Queue: "router", QPS: qps, Seed: seed, SLOAttainment: att}
	}
	runs := []*Result{
		mk(1, 1, 1), mk(1, 2, 1), mk(1, 3, 0.5), // alone: 2 + (1-0.9)/0.5 = 2.2
		mk(2, 1, 1), mk(2, 2, 0.8), mk(2, 3, 0.2), // alone: 1 + (1-0.9)/0.2 = 1.5
	}
	g := goodputs(runs, 0.9)
	if len(g) != 1 || g[0].QPS != 2 || g[0].Seeds == nil {
		t.Fatalf("goodputs() = %+v, want qps 2 (mean attainment 0.9 at 2) with a seed spread", g)
	}
	if sp := g[0].Seeds; math.Abs(sp.Min-1.5) > 1e-9 || math.Abs(sp.Max-2.2) > 1e-9 {
		t.Errorf("seed spread = %+v, want 1.5-2.2", *sp)
	}
}

func TestSweepEndToEnd(t *testing.T) {
	tr := smallTrace(t, 700)
	var specs []Spec
	for _, s := range []string{"dualmap", "least-loaded", "dualmap(choice=min-ttft)"} {
		sp, err := ParseSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, sp)
	}
	calls := 0
	sw := &Sweep{
		Trace: tr, Specs: specs, Queues: []string{QueueRouter, QueuePaper}, QPS: []float64{1, 3},
		Base:     Options{Instances: 4, Warmup: 100},
		Progress: func(done, total int) { calls++ },
	}
	rep, err := sw.Run()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3*2*2 || calls != len(rep.Runs) {
		t.Fatalf("runs = %d, progress calls = %d, want 12 each", len(rep.Runs), calls)
	}
	if len(rep.Goodput) != 6 {
		t.Errorf("goodput entries = %d, want 6", len(rep.Goodput))
	}
	// Auto-range stops once everything is below 50%.
	sw2 := &Sweep{Trace: tr, Specs: specs[:1], Queues: []string{QueueRouter}, AutoStart: 2, AutoStep: 8, Base: Options{Instances: 2, Warmup: 100, Horizon: 10 * time.Second}}
	rep2, err := sw2.Run()
	if err != nil {
		t.Fatal(err)
	}
	if last := rep2.Runs[len(rep2.Runs)-1]; last.SLOAttainment >= 0.5 {
		t.Errorf("auto-range ended at attainment %.2f, want < 0.5", last.SLOAttainment)
	}
	// No warm-up (Warmup < 0) survives the sweep's defaults: every request
	// is measured.
	sw3 := &Sweep{Trace: tr, Specs: specs[:1], Queues: []string{QueueRouter}, QPS: []float64{1}, Base: Options{Instances: 2, Warmup: -1}}
	rep3, err := sw3.Run()
	if err != nil {
		t.Fatal(err)
	}
	if got := rep3.Runs[0].Requests; got != len(tr.Requests) || rep3.Warmup != 0 {
		t.Errorf("without warm-up: %d requests measured, report warmup %d; want %d and 0", got, rep3.Warmup, len(tr.Requests))
	}
}

func TestUpperBounds(t *testing.T) {
	o, err := Options{Warmup: -1, Instances: 2}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{BlockSize: 512, Requests: []trace.Request{
		{InputTokens: 1024, Blocks: []uint64{1, 2}, OutputTokens: 11},
		{InputTokens: 1536, Blocks: []uint64{1, 2, 3}, OutputTokens: 1}, // 1024 cached
		{InputTokens: 1024, Blocks: []uint64{1, 2}, OutputTokens: 0},    // all but one token: 1023
		{InputTokens: 512, Blocks: []uint64{9}, OutputTokens: 5},        // cold
	}}
	b := upperBounds(tr, o)
	if want := float64(0+1024+1023+0) / float64(1024+1536+1024+512); math.Abs(b.hitRate-want) > 1e-12 {
		t.Errorf("hitRate = %v, want %v", b.hitRate, want)
	}
	p := o.Profile
	prefill := float64(1024+512+1+512) * p.PrefillPerToken
	decode := float64(10+0+0+4) * p.DecodePerSeq
	if want := 2 * 4 / prefill; math.Abs(b.prefillQPS-want) > 1e-9*want {
		t.Errorf("prefillQPS = %v, want %v", b.prefillQPS, want)
	}
	if want := 2 * 4 / (prefill + decode); math.Abs(b.workQPS-want) > 1e-9*want {
		t.Errorf("workQPS = %v, want %v", b.workQPS, want)
	}
}
