package peerbench

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/dualmap/dualmap/internal/replay"
)

// The TTFT floor of a workload on llm-d's simulator: what no picker can
// beat there, at any load. The simulator's per-token calculator makes a
// request's TTFT (overhead + uncached prompt tokens x per-token) x a load
// factor of at least 1, after whatever wait its engine's queue adds, so
// each request's TTFT is at least overhead + uncached x per-token with the
// fewest uncached tokens any engine could have: those of one unbounded
// cache that has seen every earlier request. The benchmark measures that
// count on one simulator with an unbounded cache and no latency, the
// requests sent one at a time in arrival order (TestPeerBench); FloorOf
// turns it into TTFTs with the benchmark profile's costs. The simulator's
// jitter (prefill-time-std-dev, 5 ms in the profile) is left out.

// PrefillCost is the per-token latency calculator's prefill cost.
type PrefillCost struct {
	Overhead, PerToken time.Duration
}

// ParsePrefillCost reads an llm-d-inference-sim config file's prefill
// cost. The floor is defined only for the per-token calculator, so any
// other is an error, as are missing or negative costs.
func ParsePrefillCost(r io.Reader) (PrefillCost, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return PrefillCost{}, err
	}
	var p struct {
		Calculator string `yaml:"latency-calculator"`
		Overhead   string `yaml:"prefill-overhead"`
		PerToken   string `yaml:"prefill-time-per-token"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		return PrefillCost{}, fmt.Errorf("simulator profile: %w", err)
	}
	if p.Calculator != "per-token" {
		return PrefillCost{}, fmt.Errorf("simulator profile: latency-calculator %q: the floor needs per-token", p.Calculator)
	}
	var c PrefillCost
	for _, f := range []struct {
		key, v string
		d      *time.Duration
	}{{"prefill-overhead", p.Overhead, &c.Overhead}, {"prefill-time-per-token", p.PerToken, &c.PerToken}} {
		if f.v == "" {
			return PrefillCost{}, fmt.Errorf("simulator profile: no %s", f.key)
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d < 0 {
			return PrefillCost{}, fmt.Errorf("simulator profile: %s %q: want a duration >= 0", f.key, f.v)
		}
		*f.d = d
	}
	return c, nil
}

// Floor is a workload's TTFT floor and the hit rate of its unbounded
// cache, the most any set of engines can reach.
type Floor struct {
	Workload  string  `json:"workload"`
	Requests  int     `json:"requests"`
	HitRate   float64 `json:"hit_rate"`
	TTFTP50MS float64 `json:"ttft_p50_ms"`
	TTFTP90MS float64 `json:"ttft_p90_ms"`
	TTFTP99MS float64 `json:"ttft_p99_ms"`
}

// FloorOf is the floor of a workload from its requests' results on the
// unbounded cache. Every request must have succeeded and reported its
// usage: a floor over some of them would not bound the percentiles of all.
func FloorOf(workload string, results []replay.Result, c PrefillCost) (Floor, error) {
	if len(results) == 0 {
		return Floor{}, errors.New("floor: no results")
	}
	ttft := make([]time.Duration, 0, len(results))
	var cached, prompt int
	for _, r := range results {
		switch {
		case !r.OK():
			return Floor{}, fmt.Errorf("floor: request %d failed: %d %s", r.Index, r.Status, r.Err)
		case !r.Usage:
			return Floor{}, fmt.Errorf("floor: request %d reported no usage", r.Index)
		case r.PromptTokens <= 0 || r.CachedTokens < 0 || r.CachedTokens > r.PromptTokens:
			return Floor{}, fmt.Errorf("floor: request %d reported %d cached of %d prompt tokens", r.Index, r.CachedTokens, r.PromptTokens)
		}
		cached += r.CachedTokens
		prompt += r.PromptTokens
		ttft = append(ttft, c.Overhead+time.Duration(r.PromptTokens-r.CachedTokens)*c.PerToken)
	}
	p := replay.PercentilesOf(ttft)
	return Floor{Workload: workload, Requests: len(results), HitRate: float64(cached) / float64(prompt),
		TTFTP50MS: MS(p.P50), TTFTP90MS: MS(p.P90), TTFTP99MS: MS(p.P99)}, nil
}

// FloorMarkdown writes floors as a Markdown table.
func FloorMarkdown(w io.Writer, floors []Floor) error {
	var b strings.Builder
	b.WriteString("| workload | requests | TTFT floor p50 / p90 / p99 ms | hit rate, unbounded cache |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, f := range floors {
		fmt.Fprintf(&b, "| %s | %d | %s / %s / %s | %.1f%% |\n", f.Workload, f.Requests,
			thousands(f.TTFTP50MS), thousands(f.TTFTP90MS), thousands(f.TTFTP99MS), 100*f.HitRate)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
