package trace

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustParseGen(t *testing.T, s string) GenConfig {
	t.Helper()
	c, err := ParseGenConfig(s)
	if err != nil {
		t.Fatalf("ParseGenConfig(%q): %v", s, err)
	}
	return c
}

func TestShapeFixed(t *testing.T) {
	tr := mustGenerate(t, mustParseGen(t, "shape=fixed,requests=500"))
	first := tr.Requests[0]
	if first.InputTokens != 5000 || len(first.Blocks) != 10 {
		t.Fatalf("first request: %d tokens in %d blocks, want 5000 in 10", first.InputTokens, len(first.Blocks))
	}
	for i, r := range tr.Requests {
		if r.InputTokens != first.InputTokens || !slices.Equal(r.Blocks, first.Blocks) {
			t.Fatalf("request %d differs from the first: %d tokens, %v", i, r.InputTokens, r.Blocks)
		}
	}
	st := tr.Stats()
	if st.UpperBoundHitRate < 0.99 {
		t.Errorf("upper-bound hit rate %.3f, want about 1 for identical prompts", st.UpperBoundHitRate)
	}
}

func TestShapeHotPrefix(t *testing.T) {
	for _, share := range []float64{0.5, 0.2} {
		c := mustParseGen(t, "shape=hot-prefix,requests=8000,prefix_tokens=2048")
		c.PrefixShare = share
		tr := mustGenerate(t, c)
		// The hot prefix is the most common first block.
		count := map[uint64]int{}
		for _, r := range tr.Requests {
			count[r.Blocks[0]]++
		}
		var hot uint64
		for b, n := range count {
			if n > count[hot] {
				hot = b
			}
		}
		got := float64(count[hot]) / float64(len(tr.Requests))
		if math.Abs(got-share) > 0.03 {
			t.Errorf("share %.2f: the hot prefix starts %.3f of the requests", share, got)
		}
		for i, r := range tr.Requests {
			if r.Blocks[0] == hot && len(r.Blocks) < 5 {
				t.Fatalf("request %d has the hot prefix but only %d blocks (prefix 4 + suffix >= 1)", i, len(r.Blocks))
			}
			if r.Blocks[0] != hot && count[r.Blocks[0]] != 1 {
				t.Fatalf("request %d: a non-hot prompt shares its first block", i)
			}
		}
	}
}

func TestShapeChat(t *testing.T) {
	tr := mustGenerate(t, mustParseGen(t, "shape=chat,requests=8000"))
	var in, out float64
	for _, r := range tr.Requests {
		if r.InputTokens < 1 || r.InputTokens > 399 || len(r.Blocks) != (r.InputTokens+511)/512 {
			t.Fatalf("chat prompt of %d tokens in %d blocks", r.InputTokens, len(r.Blocks))
		}
		in += float64(r.InputTokens)
		out += float64(r.OutputTokens)
	}
	n := float64(len(tr.Requests))
	if in/n < 180 || in/n > 220 || out/n < 900 || out/n > 1100 {
		t.Errorf("mean prompt %.0f (want about 200), mean output %.0f (want about 1000)", in/n, out/n)
	}
}

func TestArrivalOnOff(t *testing.T) {
	tr := mustGenerate(t, mustParseGen(t, "arrival=onoff,on_s=5,off_s=15,qps=4,requests=4000"))
	for i, r := range tr.Requests {
		if in := math.Mod(r.Arrival.Seconds(), 20); in >= 5+1e-9 {
			t.Fatalf("request %d arrives at %v, %.2f s into its 20 s cycle: in an off period", i, r.Arrival, in)
		}
	}
	d := tr.Requests[len(tr.Requests)-1].Arrival.Seconds()
	if rate := float64(len(tr.Requests)-1) / d; rate < 3.6 || rate > 4.4 {
		t.Errorf("mean rate %.2f, want about 4", rate)
	}
	// With on_qps the rate while on is fixed whatever qps says.
	tr = mustGenerate(t, mustParseGen(t, "arrival=onoff,on_s=5,off_s=15,on_qps=40,requests=2000"))
	d = tr.Requests[len(tr.Requests)-1].Arrival.Seconds()
	if rate := float64(len(tr.Requests)-1) / d; rate < 9 || rate > 11 {
		t.Errorf("mean rate %.2f, want about 40 x 5/20 = 10", rate)
	}
}

func TestSLOMix(t *testing.T) {
	c := mustParseGen(t, "requests=6000,slo_mix=1s:0.25/2s:0.25/30s:0.5")
	tr := mustGenerate(t, c)
	count := map[time.Duration]int{}
	for _, r := range tr.Requests {
		count[r.SLO]++
	}
	for slo, want := range map[time.Duration]float64{time.Second: 0.25, 2 * time.Second: 0.25, 30 * time.Second: 0.5} {
		if got := float64(count[slo]) / 6000; math.Abs(got-want) > 0.03 {
			t.Errorf("SLO %v: share %.3f, want %.2f", slo, got, want)
		}
	}
	if len(count) != 3 {
		t.Errorf("SLOs drawn: %v", count)
	}
	// The mix does not change the prompts or arrivals.
	c.SLOMix = nil
	plain := mustGenerate(t, c)
	for i := range plain.Requests {
		a, b := plain.Requests[i], tr.Requests[i]
		b.SLO = 0
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("request %d changed with the SLO mix: %+v vs %+v", i, a, b)
		}
	}
	// Write and Read keep the SLOs.
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Requests {
		if back.Requests[i].SLO != tr.Requests[i].SLO {
			t.Fatalf("request %d: SLO %v read back as %v", i, tr.Requests[i].SLO, back.Requests[i].SLO)
		}
	}
}

// TestGenSpecErrors checks that impossible values are rejected, by the
// parser or by Generate, with an error that names the key.
func TestGenSpecErrors(t *testing.T) {
	tests := []struct{ spec, key string }{
		{"qps=-1", "qps"},
		{"qps=0", "qps"},
		{"requests=0", "requests"},
		{"prompt_tokens=0", "prompt_tokens"},
		{"shape=fixed,prompt_tokens=-5", "prompt_tokens"},
		{"on_s=0", "on_s"},
		{"off_s=-1", "off_s"},
		{"on_qps=-2", "on_qps"},
		{"prefix_share=1.5", "prefix_share"},
		{"prefix_tokens=0", "prefix_tokens"},
		{"hot_share=2", "hot_share"},
		{"hot_prompts=3,hot_share=0.5", "hot_share"},
		{"session_prob=1.5", "session_prob"},
		{"output_mean=0", "output_mean"},
		{"output_sigma=NaN", "output_sigma"},
		{"zipf=-1", "zipf"},
		{"shape=square", "shape"},
		{"arrival=uniform", "arrival"},
		{"slo_mix=2s:0.5/30s:0.6", "slo_mix"},
		{"slo_mix=0s:1", "slo_mix"},
		{"slo_mix=2s", "slo_mix"},
		{"slo_mix=2s:1.5", "slo_mix"},
		{"burst_mean=0.5", "burst_mean"},
		{"colour=red", "colour"},
		{"qps=2,qps=3", "qps"},
		{"max_input_tokens=0", "max_input_tokens"},
		{"block_size=0", "block_size"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			c, err := ParseGenConfig(tt.spec)
			if err == nil {
				c.Requests = min(c.Requests, 100)
				if c.Requests == 0 {
					c.Requests = 100
				}
				_, err = Generate(c)
			}
			if err == nil {
				t.Fatalf("%q accepted", tt.spec)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("%q: error %q does not wrap ErrInvalidConfig or name %s", tt.spec, err, tt.key)
			}
		})
	}
}

func TestParseGenConfig(t *testing.T) {
	c := mustParseGen(t, " shape=hot-prefix, seed=7 ,requests=100,qps=2.5,prefixes=0,hot_prompts=0,session_prob=0,slo_mix=2s:0.5/30s:0.5")
	want := GenConfig{Shape: ShapeHotPrefix, Seed: 7, Requests: 100, QPS: 2.5, Prefixes: -1, HotPrompts: -1, SessionProb: -1,
		SLOMix: []SLOClass{{2 * time.Second, 0.5}, {30 * time.Second, 0.5}}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	if got := FormatSLOMix(c.SLOMix); got != "2s:0.5/30s:0.5" {
		t.Errorf("FormatSLOMix = %q", got)
	}
	if d := mustParseGen(t, "default"); !reflect.DeepEqual(d, GenConfig{}) {
		t.Errorf("default = %+v", d)
	}
	for _, k := range GenKeys {
		if _, err := ParseGenConfig(k + "=x"); err == nil || !strings.Contains(err.Error(), k) {
			if k != "shape" && k != "arrival" { // free text, checked by Generate
				t.Errorf("%s=x: error %v", k, err)
			}
		}
	}
}

// FuzzParseGenConfig checks that a spec is either rejected with an error
// wrapping ErrInvalidConfig or generates a valid trace, never panics.
func FuzzParseGenConfig(f *testing.F) {
	for _, s := range []string{
		"default", "shape=fixed,prompt_tokens=5000", "shape=hot-prefix,prefix_share=0.5",
		"shape=chat,output_mean=2000", "arrival=onoff,on_s=2,off_s=8,on_qps=20",
		"slo_mix=1s:0.25/2s:0.25/30s:0.5", "qps=-1", "block_size=1,max_input_tokens=100000000",
		"arrival=bursty,burst_mean=3", "requests=10,prefixes=0,hot_prompts=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseGenConfig(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidConfig", s, err)
			}
			return
		}
		// Keep the work small: the generator's cost grows with these.
		if c.Requests == 0 || c.Requests > 200 {
			c.Requests = 200
		}
		c.MaxInputTokens = min(max(c.MaxInputTokens, 0), 1<<16)
		tr, err := Generate(c)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%q: Generate error %v does not wrap ErrInvalidConfig", s, err)
			}
			return
		}
		if err := checkTrace(tr); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}

// checkTrace checks a generated trace's invariants and that it reads back
// from the Mooncake format unchanged.
func checkTrace(tr *Trace) error {
	bs := tr.BlockSize
	for i, r := range tr.Requests {
		if len(r.Blocks) == 0 || r.InputTokens < 1 || r.OutputTokens < 1 || r.Arrival < 0 || r.SLO < 0 ||
			len(r.Blocks) != (r.InputTokens+bs-1)/bs {
			return fmt.Errorf("request %d = %+v breaks the invariants", i, r)
		}
	}
	if len(tr.Requests) == 0 || tr.Requests[0].Arrival != 0 || !slices.IsSortedFunc(tr.Requests, cmpArrival) {
		return fmt.Errorf("arrivals do not start at 0 or are not sorted")
	}
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		return err
	}
	back, err := Read(&buf, Options{BlockSize: bs})
	if err != nil {
		return fmt.Errorf("Read(Write(t)): %v", err)
	}
	if !reflect.DeepEqual(back.Requests, tr.Requests) {
		return fmt.Errorf("Read(Write(t)) differs")
	}
	return nil
}
