package trace

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustGenerate(t *testing.T, cfg GenConfig) *Trace {
	t.Helper()
	tr, err := Generate(cfg)
	if err != nil {
		t.Fatalf("Generate(%+v) error = %v", cfg, err)
	}
	return tr
}

func TestGenerateDeterministic(t *testing.T) {
	a := mustGenerate(t, GenConfig{Seed: 42, Requests: 2000})
	b := mustGenerate(t, GenConfig{Seed: 42, Requests: 2000})
	c := mustGenerate(t, GenConfig{Seed: 43, Requests: 2000})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Generate() with the same seed differs")
	}
	if reflect.DeepEqual(a.Requests, c.Requests) {
		t.Errorf("Generate() with seeds 42 and 43 is identical")
	}
	// Arrivals and prompts use separate streams.
	d := mustGenerate(t, GenConfig{Seed: 42, Requests: 2000, Arrival: ArrivalBursty})
	for i := range a.Requests {
		a.Requests[i].Arrival, d.Requests[i].Arrival = 0, 0
	}
	if !reflect.DeepEqual(a.Requests, d.Requests) {
		t.Errorf("Generate() prompts depend on the arrival process")
	}
}

func TestGenerateDefaults(t *testing.T) {
	tr := mustGenerate(t, GenConfig{Seed: 1})
	s := tr.Stats()
	if s.Requests != 8000 || tr.BlockSize != 512 {
		t.Errorf("Generate() = %d requests of block size %d, want 8000 of 512", s.Requests, tr.BlockSize)
	}
	if !strings.HasPrefix(tr.Source, GeneratedPrefix) {
		t.Errorf("Generate().Source = %q, want prefix %q", tr.Source, GeneratedPrefix)
	}
	if s.UpperBoundHitRate <= 0.5 {
		t.Errorf("Stats().UpperBoundHitRate = %v, want > 0.5", s.UpperBoundHitRate)
	}
	if s.MaxInputTokens > 32768 {
		t.Errorf("Stats().MaxInputTokens = %d, want <= 32768", s.MaxInputTokens)
	}
	if math.Abs(s.MeanOutputTokens-300) > 30 {
		t.Errorf("Stats().MeanOutputTokens = %v, want 300 ± 30", s.MeanOutputTokens)
	}
}

func TestGenerateRate(t *testing.T) {
	for _, arrival := range []string{ArrivalPoisson, ArrivalBursty} {
		for _, qps := range []float64{4, 50} {
			for seed := range uint64(3) {
				tr := mustGenerate(t, GenConfig{Seed: seed, QPS: qps, Arrival: arrival})
				if got := tr.Stats().MeanQPS; math.Abs(got-qps) > 0.1*qps {
					t.Errorf("Generate(%s, QPS %v, seed %d) mean rate = %v, want within 10%%", arrival, qps, seed, got)
				}
				if tr.Requests[0].Arrival != 0 || !slices.IsSortedFunc(tr.Requests, cmpArrival) {
					t.Errorf("Generate(%s) arrivals not sorted from 0", arrival)
				}
			}
		}
	}
}

func TestGenerateBursts(t *testing.T) {
	groups := func(tr *Trace) float64 {
		n := 1
		for i := 1; i < len(tr.Requests); i++ {
			if tr.Requests[i].Arrival != tr.Requests[i-1].Arrival {
				n++
			}
		}
		return float64(len(tr.Requests)) / float64(n)
	}
	tests := []struct {
		cfg      GenConfig
		min, max float64 // mean requests per distinct instant
	}{
		{GenConfig{Seed: 1}, 1, 1},
		{GenConfig{Seed: 1, Arrival: ArrivalBursty}, 7, 9},
		{GenConfig{Seed: 1, Arrival: ArrivalBursty, BurstMean: 3}, 2.7, 3.3},
		{GenConfig{Seed: 1, Arrival: ArrivalBursty, BurstMean: 1}, 1, 1},
	}
	for _, tt := range tests {
		if got := groups(mustGenerate(t, tt.cfg)); got < tt.min || got > tt.max {
			t.Errorf("Generate(%s, BurstMean %v) = %.2f requests per instant, want in [%v, %v]", tt.cfg.Arrival, tt.cfg.BurstMean, got, tt.min, tt.max)
		}
	}
}

// firstBlockShares returns the shares of traffic of the most common first
// blocks, largest first.
func firstBlockShares(tr *Trace) []float64 {
	count := make(map[uint64]int)
	for _, r := range tr.Requests {
		count[r.Blocks[0]]++
	}
	var shares []float64
	for _, n := range count {
		shares = append(shares, float64(n)/float64(len(tr.Requests)))
	}
	slices.Sort(shares)
	slices.Reverse(shares)
	return shares
}

func TestGenerateHotPrompts(t *testing.T) {
	tests := []struct {
		cfg   GenConfig
		share float64
		hot   int
	}{
		{GenConfig{Seed: 1}, 0.2, 2},
		{GenConfig{Seed: 2, HotPrompts: 3, HotShare: 0.25, Requests: 20000}, 0.25, 3},
		{GenConfig{Seed: 3, HotPrompts: 1, HotShare: 0.5, SessionProb: -1}, 0.5, 1},
	}
	for _, tt := range tests {
		tr := mustGenerate(t, tt.cfg)
		shares := firstBlockShares(tr)
		for i := range tt.hot {
			if math.Abs(shares[i]-tt.share) > 0.03 {
				t.Errorf("Generate(%+v) hot prompt %d share = %.3f, want %.2f ± 0.03", tt.cfg, i, shares[i], tt.share)
			}
		}
		if shares[tt.hot] > tt.share-0.05 {
			t.Errorf("Generate(%+v) the most popular non-hot prefix has share %.3f, too close to %.2f", tt.cfg, shares[tt.hot], tt.share)
		}
		// The hot prompts are 12 blocks deep: requests starting with one
		// share its 12 blocks.
		prompts := make(map[uint64][]uint64)
		for _, r := range tr.Requests {
			p, ok := prompts[r.Blocks[0]]
			if !ok {
				prompts[r.Blocks[0]] = r.Blocks[:min(12, len(r.Blocks))]
				continue
			}
			if n := min(12, len(p), len(r.Blocks)); !slices.Equal(p[:n], r.Blocks[:n]) {
				prompts[r.Blocks[0]] = p[:commonPrefix(p, r.Blocks)]
			}
		}
		deep := 0
		for _, p := range prompts {
			if len(p) == 12 && float64(countFirst(tr, p[0]))/float64(len(tr.Requests)) > tt.share-0.03 {
				deep++
			}
		}
		if deep != tt.hot {
			t.Errorf("Generate(%+v) has %d prompts of 12 shared blocks with share near %.2f, want %d", tt.cfg, deep, tt.share, tt.hot)
		}
	}
}

func commonPrefix(a, b []uint64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func countFirst(tr *Trace, first uint64) int {
	n := 0
	for _, r := range tr.Requests {
		if r.Blocks[0] == first {
			n++
		}
	}
	return n
}

func TestGenerateFeaturesOff(t *testing.T) {
	// No sharing at all: every block is fresh, so nothing is reusable.
	tr := mustGenerate(t, GenConfig{Seed: 1, Requests: 1000, Prefixes: -1, HotPrompts: -1, SessionProb: -1})
	if s := tr.Stats(); s.UpperBoundHitRate != 0 || s.DistinctBlocks != s.TotalBlocks {
		t.Errorf("Generate(no sharing) Stats() = %v, want no reuse", s)
	}
	// Sessions only: a next turn starts with its session's whole previous prompt.
	tr = mustGenerate(t, GenConfig{Seed: 1, Requests: 1000, Prefixes: -1, HotPrompts: -1, SessionProb: 0.9, RecentSessions: 1})
	if s := tr.Stats(); s.UpperBoundHitRate < 0.5 {
		t.Errorf("Generate(sessions only) Stats() = %v, want most blocks reused", s)
	}
}

// TestGenerateChained checks the Mooncake id properties: equal ids only at
// equal positions after equal prefixes, and ids in order of first use.
func TestGenerateChained(t *testing.T) {
	tr := mustGenerate(t, GenConfig{Seed: 9, Requests: 3000, MaxInputTokens: 4000, BlockSize: 100})
	type where struct {
		pos    int
		parent uint64
	}
	seen := make(map[uint64]where)
	next := uint64(0)
	for i, r := range tr.Requests {
		if len(r.Blocks) > 40 || r.InputTokens > 4000 {
			t.Fatalf("request %d has %d blocks, %d tokens, want <= 40 and <= 4000", i, len(r.Blocks), r.InputTokens)
		}
		for j, b := range r.Blocks {
			w := where{pos: j, parent: math.MaxUint64}
			if j > 0 {
				w.parent = r.Blocks[j-1]
			}
			if prev, ok := seen[b]; ok && prev != w {
				t.Fatalf("request %d: block %d at %+v, earlier at %+v", i, b, w, prev)
			}
			if b > next {
				t.Fatalf("request %d: block id %d skips ahead of %d", i, b, next)
			}
			if b == next {
				next++
			}
			seen[b] = w
		}
	}
}

// TestGenerateIsMooncake checks that Write then Read reproduces a generated
// trace, so it is valid Mooncake.
func TestGenerateIsMooncake(t *testing.T) {
	for _, cfg := range []GenConfig{{Seed: 1}, {Seed: 2, Arrival: ArrivalBursty, BlockSize: 64, MaxInputTokens: 1000}} {
		tr := mustGenerate(t, cfg)
		var buf bytes.Buffer
		if err := Write(&buf, tr); err != nil {
			t.Fatalf("Write() error = %v", err)
		}
		got, err := Read(&buf, Options{BlockSize: tr.BlockSize})
		if err != nil {
			t.Fatalf("Read(Write(Generate())) error = %v", err)
		}
		got.Source = tr.Source
		if !reflect.DeepEqual(got, tr) {
			t.Errorf("Read(Write(Generate(%+v))) differs", cfg)
		}
	}
}

func TestGenerateInvalid(t *testing.T) {
	tests := []struct {
		cfg   GenConfig
		field string
	}{
		{GenConfig{Requests: -1}, "Requests"},
		{GenConfig{QPS: -4}, "QPS"},
		{GenConfig{QPS: math.Inf(1)}, "QPS"},
		{GenConfig{QPS: 1e-12}, "QPS"},
		{GenConfig{Arrival: "uniform"}, "Arrival"},
		{GenConfig{BurstMean: 0.5}, "BurstMean"},
		{GenConfig{BlockSize: -512}, "BlockSize"},
		{GenConfig{ZipfS: -1}, "ZipfS"},
		{GenConfig{ZipfS: math.NaN()}, "ZipfS"},
		{GenConfig{PrefixMinBlocks: -2}, "PrefixMinBlocks"},
		{GenConfig{PrefixMinBlocks: 20}, "PrefixMaxBlocks"},
		{GenConfig{HotShare: 1.5}, "HotShare"},
		{GenConfig{HotPrompts: 3, HotShare: 0.4}, "HotPrompts × HotShare"},
		{GenConfig{HotBlocks: -1}, "HotBlocks"},
		{GenConfig{SessionProb: 1.2}, "SessionProb"},
		{GenConfig{RecentSessions: -1}, "RecentSessions"},
		{GenConfig{TurnBlocks: -1}, "TurnBlocks"},
		{GenConfig{SuffixMaxBlocks: -1}, "SuffixMaxBlocks"},
		{GenConfig{OutputMean: -300}, "OutputMean"},
		{GenConfig{OutputSigma: -1}, "OutputSigma"},
		{GenConfig{MaxInputTokens: -1}, "MaxInputTokens"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			tr, err := Generate(tt.cfg)
			if err == nil {
				t.Fatalf("Generate(%+v) = %d requests, want an error naming %s", tt.cfg, len(tr.Requests), tt.field)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "trace: invalid generator config: "+tt.field) {
				t.Errorf("Generate(%+v) error = %v, want ErrInvalidConfig naming %s", tt.cfg, err, tt.field)
			}
		})
	}
}

func TestGenConfigWithDefaults(t *testing.T) {
	d := GenConfig{}.withDefaults()
	if d.Requests != 8000 || d.QPS != 4 || d.Arrival != ArrivalPoisson || d.BurstMean != 8 || d.BlockSize != 512 ||
		d.Prefixes != 200 || d.ZipfS != 1.1 || d.PrefixMinBlocks != 2 || d.PrefixMaxBlocks != 16 ||
		d.HotPrompts != 2 || d.HotShare != 0.2 || d.HotBlocks != 12 || d.SessionProb != 0.3 ||
		d.TurnBlocks != 4 || d.SuffixMaxBlocks != 8 || d.OutputMean != 300 || d.MaxInputTokens != 32768 {
		t.Errorf("GenConfig{}.withDefaults() = %+v", d)
	}
	if dd := d.withDefaults(); !reflect.DeepEqual(dd, d) {
		t.Errorf("withDefaults is not idempotent: %+v then %+v", d, dd)
	}
	off := GenConfig{Prefixes: -1, HotPrompts: -1, SessionProb: -1}.withDefaults()
	if off.Prefixes != -1 || off.HotPrompts != -1 || off.SessionProb != -1 {
		t.Errorf("withDefaults() turned features back on: %+v", off)
	}
}
