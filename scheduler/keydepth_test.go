package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// feed observes count requests: a share hot of them under the hot prompt
// (hot prefix of hotShared blocks), the rest unique.
func feed(k *keyDepth, rng *rand.Rand, count int, hot float64, hotPrompt func(int) []uint64, next *uint64) {
	for i := 0; i < count; i++ {
		var b []uint64
		if rng.Float64() < hot {
			b = hotPrompt(i)
		} else {
			*next++
			b = prompt(*next, *next, 0, 8)
		}
		k.observe(b, k.depth(b), 0)
	}
}

func TestKeyDepthSplitsHotPrefixAndMergesWhenCold(t *testing.T) {
	const n = 8
	k := newKeyDepth(KeyDepthConfig{}.withDefaults(), n, 512)
	rng := rand.New(rand.NewPCG(1, 1))
	var next uint64 = 1000
	// 40% of traffic shares a 6-block prefix (then unique tails): far above 2/n = 25%.
	hotPrompt := func(i int) []uint64 { return prompt(7, uint64(rng.IntN(1<<30)), 6, 10) }
	probe := prompt(7, 99, 6, 10)
	if got := k.depth(probe); got != 2 {
		t.Fatalf("depth() before traffic = %d, want 2", got)
	}
	feed(k, rng, 20000, 0.4, hotPrompt, &next)
	if got := k.depth(probe); got < 7 {
		t.Errorf("depth() of hot prefix = %d, want >= 7 (split past the 6 shared blocks)", got)
	}
	cold := prompt(123456, 123456, 0, 8)
	if got := k.depth(cold); got != 2 {
		t.Errorf("depth() of cold prompt = %d, want 2", got)
	}
	// Hot prefix goes quiet: after a few windows it merges back.
	feed(k, rng, 20000, 0, hotPrompt, &next)
	if got := k.depth(probe); got != 2 {
		t.Errorf("depth() after cooling = %d, want 2 (merged)", got)
	}
	if len(k.split) != 0 {
		t.Errorf("splits after cooling = %d, want 0", len(k.split))
	}
}

// A share between 1/n and 2/n neither splits a cold prefix nor merges a
// split one: the hysteresis band.
func TestKeyDepthHysteresis(t *testing.T) {
	const n = 8 // the paper's rule: split above 25%, merge below 12.5%
	k := newKeyDepth(KeyDepthConfig{SplitFactor: 2}.withDefaults(), n, 512)
	rng := rand.New(rand.NewPCG(2, 2))
	var next uint64 = 1 << 30
	hotPrompt := func(i int) []uint64 { return prompt(9, uint64(rng.IntN(1<<30)), 3, 6) }
	probe := prompt(9, 1, 3, 6)
	feed(k, rng, 10000, 0.18, hotPrompt, &next)
	if got := k.depth(probe); got != 2 {
		t.Fatalf("depth() at 18%% share = %d, want 2 (below split threshold)", got)
	}
	feed(k, rng, 10000, 0.4, hotPrompt, &next)
	if got := k.depth(probe); got < 3 {
		t.Fatalf("depth() at 40%% share = %d, want >= 3", got)
	}
	feed(k, rng, 10000, 0.18, hotPrompt, &next)
	if got := k.depth(probe); got < 3 {
		t.Errorf("depth() back at 18%% share = %d, want still split (hysteresis)", got)
	}
}

// Splitting a hot prefix must not make its parent look cold: requests count
// toward every prefix of their key, so the split parent keeps its share and
// stays split while the traffic lasts (no flapping).
func TestKeyDepthNoFlap(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512)
	rng := rand.New(rand.NewPCG(3, 3))
	var next uint64 = 1 << 31
	hotPrompt := func(i int) []uint64 { return prompt(11, uint64(rng.IntN(1<<30)), 4, 8) }
	probe := prompt(11, 5, 4, 8)
	feed(k, rng, 4000, 0.5, hotPrompt, &next)
	want := k.depth(probe)
	for round := 0; round < 20; round++ {
		feed(k, rng, 500, 0.5, hotPrompt, &next)
		if got := k.depth(probe); got != want {
			t.Fatalf("round %d: depth() = %d, want stable %d", round, got, want)
		}
	}
}

func TestKeyDepthDeterministicAndExportImport(t *testing.T) {
	run := func() *keyDepth {
		k := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512)
		rng := rand.New(rand.NewPCG(4, 4))
		var next uint64 = 1 << 32
		feed(k, rng, 5000, 0.6, func(i int) []uint64 { return prompt(uint64(i%2), uint64(rng.IntN(1<<30)), 5, 9) }, &next)
		return k
	}
	a, b := run(), run()
	ea, eb := a.export(), b.export()
	if !slices.Equal(ea.Splits, eb.Splits) || len(ea.Splits) == 0 {
		t.Fatalf("export() differs between identical runs or is empty: %v vs %v", ea.Splits, eb.Splits)
	}
	c := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512)
	c.importState(ea)
	for i := uint64(0); i < 2; i++ {
		p := prompt(i, 77, 5, 9)
		if a.depth(p) <= 2 {
			t.Fatalf("depth() of a 30%% prefix = %d, want > 2", a.depth(p))
		}
		if a.depth(p) != c.depth(p) {
			t.Errorf("depth() after import = %d, want %d", c.depth(p), a.depth(p))
		}
	}
}

func TestKeyDepthBoundedMemory(t *testing.T) {
	cfg := KeyDepthConfig{Window: 1000}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 100000; i++ {
		b := prompt(rng.Uint64(), rng.Uint64(), 0, 40)
		k.observe(b, k.depth(b), 0)
	}
	// Each request counts at most 2 prefixes here (depth 2 plus look-ahead).
	if m := k.memory(); m > 2*cfg.Window+cfg.MaxSplits {
		t.Errorf("memory() = %d, want <= %d", m, 2*cfg.Window+cfg.MaxSplits)
	}
}

func TestKeyDepthTimeWindow(t *testing.T) {
	cfg := KeyDepthConfig{WindowDuration: 10 * time.Second}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	probe := prompt(1, 2, 4, 6)
	now := time.Duration(0)
	for i := 0; i < 2000; i++ { // 100 req/s, all under one prefix
		now += 10 * time.Millisecond
		b := prompt(1, uint64(i), 4, 6)
		k.observe(b, k.depth(b), now)
	}
	if k.depth(probe) < 3 {
		t.Fatalf("depth() = %d, want split under a time window", k.depth(probe))
	}
	// Long silence then other traffic: the window forgets and merges.
	for i := 0; i < 3000; i++ {
		now += 10 * time.Millisecond
		b := prompt(uint64(10+i), uint64(i), 0, 6)
		k.observe(b, k.depth(b), now+time.Minute)
	}
	if got := k.depth(probe); got != 2 {
		t.Errorf("depth() after the window moved on = %d, want 2", got)
	}
}

func TestKeyDepthFixedAndShortPrompts(t *testing.T) {
	fixed := newKeyDepth(KeyDepthConfig{Fixed: 4}.withDefaults(), 8, 512)
	tests := []struct {
		name string
		k    *keyDepth
		n    int
		want int
	}{
		{"fixed long", fixed, 10, 4},
		{"fixed short", fixed, 3, 3},
		{"adaptive one block", newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512), 1, 1},
		{"adaptive empty", newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.k.depth(prompt(1, 1, 0, tt.n)); got != tt.want {
				t.Errorf("depth() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestKeyDepthConfigValidate(t *testing.T) {
	bad := []KeyDepthConfig{
		{MinDepth: -1},
		{MinDepth: 4, MaxDepth: 3},
		{Window: 5, Buckets: 10},
		{SplitFactor: 1, MergeFactor: 2},
		{SplitFactor: -1},
		{Fixed: -2},
	}
	for _, c := range bad {
		if err := c.withDefaults().validate(); err == nil {
			t.Errorf("validate(%+v) = nil, want an error", c)
		}
	}
}

// With 16-token blocks, keys still grow in 512-token key blocks: two
// prompts sharing a 1,000-token system prompt but differing after it get
// different keys only if the key reaches past the shared part, and the
// minimum key covers 1,024 tokens, not 32.
func TestKeyDepthKeyBlocks(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 16)
	if k.stride != 32 {
		t.Fatalf("stride = %d, want 32", k.stride)
	}
	a := prompt(1, 1, 62, 100) // 62 shared 16-token blocks (992 tokens), 1,600 tokens in all
	b := prompt(1, 2, 62, 100)
	if d := k.depth(a); d != 2 {
		t.Fatalf("depth() = %d, want 2 key blocks", d)
	}
	if k.key(a, 2) == k.key(b, 2) {
		t.Error("prompts differing at token 992 share a 1,024-token key")
	}
	short := prompt(1, 3, 62, 40) // 640 tokens: one whole key block and a partial one
	if d := k.depth(short); d != 1 || k.key(short, 1) != short[31] {
		t.Errorf("short prompt: depth %d key %x, want 1 whole key block (block 31)", d, k.key(short, 1))
	}
	tiny := prompt(1, 6, 10, 20) // 320 tokens: no whole key block, keyed by all of it
	if d := k.depth(tiny); d != 1 || k.key(tiny, 1) != tiny[19] {
		t.Errorf("tiny prompt: depth %d, want 1 (the whole prompt)", d)
	}
	same := prompt(1, 4, 64, 100) // shares all of the first 64 blocks with c below
	c := prompt(1, 5, 64, 100)
	if k.key(same, 2) != k.key(c, 2) {
		t.Error("prompts sharing 1,024 tokens got different keys")
	}
}

// After an idle gap longer than the window, nothing from before it counts.
func TestKeyDepthTimeWindowForgetsAfterIdle(t *testing.T) {
	cfg := KeyDepthConfig{WindowDuration: 10 * time.Second}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	now := time.Duration(0)
	for i := 0; i < 900; i++ {
		now += 10 * time.Millisecond
		b := prompt(1, uint64(i), 4, 6)
		k.observe(b, k.depth(b), now)
	}
	now += 100 * time.Second
	b := prompt(50, 50, 0, 6)
	k.observe(b, k.depth(b), now)
	if k.total != 1 {
		t.Errorf("window total after 100 s idle = %d, want 1 (only the new request)", k.total)
	}
}

// Prompts keyed below MinDepth (one whole key block) are counted, so a hot
// one-key-block prefix splits too.
func TestKeyDepthShortKeysSplit(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{Window: 500}.withDefaults(), 8, 16)
	for i := 0; i < 3000; i++ {
		b := prompt(1, uint64(i), 32, 40) // 512 shared tokens, then a short tail
		k.observe(b, k.depth(b), 0)
	}
	if len(k.split) == 0 {
		t.Fatal("a prefix taking all traffic with one-key-block keys never split")
	}
	if d := k.depth(prompt(1, 99999, 32, 40)); d != 2 {
		t.Errorf("depth() of the hot short prompt = %d, want 2 after the split", d)
	}
}

// A replica that shares the pool with others sees only its share of the
// traffic: it closes a bucket after that share, so it splits a hot prefix
// after as many of its own requests as one router would need of the
// pool's, divided by the replicas.
func TestKeyDepthBucketsPerReplica(t *testing.T) {
	const n = 8
	cfg := KeyDepthConfig{}.withDefaults()
	per := cfg.Window / cfg.Buckets
	hot := func(i int) []uint64 { return prompt(7, uint64(i)+1, 6, 10) }
	probe := prompt(7, 99, 6, 10)
	for _, tt := range []struct {
		replicas int
		split    bool
	}{{1, false}, {3, true}} {
		k := newKeyDepth(cfg, n, 512)
		k.setReplicas(tt.replicas)
		rng := rand.New(rand.NewPCG(1, 1))
		var next uint64 = 1000
		// Half a one-router bucket: enough for a third of one.
		feed(k, rng, per/2, 0.5, hot, &next)
		if got := k.depth(probe) > 2; got != tt.split {
			t.Errorf("%d replicas: hot prefix split after %d own requests = %v, want %v (depth %d)", tt.replicas, per/2, got, tt.split, k.depth(probe))
		}
	}
}
