package trace

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GenKeys are the keys ParseGenConfig accepts, in the order of the
// documentation (docs/simulator.md, "Generated workloads").
var GenKeys = []string{
	"shape", "seed", "requests", "qps", "arrival", "burst_mean", "on_s", "off_s", "on_qps",
	"block_size", "prefixes", "zipf", "prefix_min_blocks", "prefix_max_blocks",
	"hot_prompts", "hot_share", "hot_blocks", "session_prob", "recent_sessions",
	"turn_blocks", "suffix_max_blocks", "prompt_tokens", "prefix_share", "prefix_tokens",
	"output_mean", "output_sigma", "max_input_tokens", "slo_mix",
}

// maxGenSpecBytes bounds the text ParseGenConfig reads.
const maxGenSpecBytes = 4096

// ParseGenConfig parses a generator spec: "default", or comma-separated
// key=value pairs with the keys of GenKeys (the snake_case names of the
// GenConfig fields; on_s and off_s are OnSeconds and OffSeconds, zipf is
// ZipfS). slo_mix is a /-separated list of duration:share, e.g.
// "2s:0.5/30s:0.5". A key may appear once. prefixes, hot_prompts and
// session_prob accept 0 for "none" (GenConfig's -1); every other numeric key
// must be > 0 (seed >= 0). Errors wrap ErrInvalidConfig and name the key; the
// values are range-checked by Generate (also naming the key).
func ParseGenConfig(s string) (GenConfig, error) {
	var c GenConfig
	s = strings.TrimSpace(s)
	if s == "default" || s == "" {
		return c, nil
	}
	if len(s) > maxGenSpecBytes {
		return c, fmt.Errorf("trace: %w: spec longer than %d bytes", ErrInvalidConfig, maxGenSpecBytes)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return c, fmt.Errorf("trace: %w: %q is not key=value", ErrInvalidConfig, kv)
		}
		if seen[k] {
			return c, fmt.Errorf("trace: %w: %s given twice", ErrInvalidConfig, k)
		}
		seen[k] = true
		if err := c.set(k, v); err != nil {
			return c, fmt.Errorf("trace: %w: %s: %v", ErrInvalidConfig, k, err)
		}
	}
	return c, nil
}

// set sets the field of key k from v.
func (c *GenConfig) set(k, v string) error {
	pos := func(p *int) error { // > 0
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", v)
		}
		*p = n
		return nil
	}
	posf := func(p *float64) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) {
			return fmt.Errorf("%q is not a positive number", v)
		}
		*p = f
		return nil
	}
	offInt := func(p *int) error { // >= 0; 0 is "none"
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not an integer >= 0", v)
		}
		if *p = n; n == 0 {
			*p = -1
		}
		return nil
	}
	switch k {
	case "shape":
		c.Shape = v
	case "arrival":
		c.Arrival = v
	case "seed":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer >= 0", v)
		}
		c.Seed = n
	case "requests":
		return pos(&c.Requests)
	case "qps":
		return posf(&c.QPS)
	case "burst_mean":
		return posf(&c.BurstMean)
	case "on_s":
		return posf(&c.OnSeconds)
	case "off_s":
		return posf(&c.OffSeconds)
	case "on_qps":
		return posf(&c.OnQPS)
	case "block_size":
		return pos(&c.BlockSize)
	case "prefixes":
		return offInt(&c.Prefixes)
	case "zipf":
		return posf(&c.ZipfS)
	case "prefix_min_blocks":
		return pos(&c.PrefixMinBlocks)
	case "prefix_max_blocks":
		return pos(&c.PrefixMaxBlocks)
	case "hot_prompts":
		return offInt(&c.HotPrompts)
	case "hot_share":
		return posf(&c.HotShare)
	case "hot_blocks":
		return pos(&c.HotBlocks)
	case "session_prob":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0) {
			return fmt.Errorf("%q is not a number >= 0", v)
		}
		if c.SessionProb = f; f == 0 {
			c.SessionProb = -1
		}
	case "recent_sessions":
		return pos(&c.RecentSessions)
	case "turn_blocks":
		return pos(&c.TurnBlocks)
	case "suffix_max_blocks":
		return pos(&c.SuffixMaxBlocks)
	case "prompt_tokens":
		return pos(&c.PromptTokens)
	case "prefix_share":
		return posf(&c.PrefixShare)
	case "prefix_tokens":
		return pos(&c.PrefixTokens)
	case "output_mean":
		return posf(&c.OutputMean)
	case "output_sigma":
		return posf(&c.OutputSigma)
	case "max_input_tokens":
		return pos(&c.MaxInputTokens)
	case "slo_mix":
		mix, err := ParseSLOMix(v)
		if err != nil {
			return err
		}
		c.SLOMix = mix
	default:
		return fmt.Errorf("unknown key (want one of %s)", strings.Join(GenKeys, ", "))
	}
	return nil
}

// ParseSLOMix parses "duration:share/duration:share/...", e.g.
// "1s:0.25/2s:0.25/30s:0.5". The classes are range-checked by Generate.
func ParseSLOMix(s string) ([]SLOClass, error) {
	var out []SLOClass
	for _, p := range strings.Split(s, "/") {
		d, sh, ok := strings.Cut(strings.TrimSpace(p), ":")
		slo, err1 := time.ParseDuration(strings.TrimSpace(d))
		share, err2 := strconv.ParseFloat(strings.TrimSpace(sh), 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not duration:share (e.g. 2s:0.5)", p)
		}
		if len(out) == maxSLOClasses {
			return nil, fmt.Errorf("more than %d classes", maxSLOClasses)
		}
		out = append(out, SLOClass{SLO: slo, Share: share})
	}
	return out, nil
}

// FormatSLOMix is the inverse of ParseSLOMix.
func FormatSLOMix(mix []SLOClass) string {
	parts := make([]string, len(mix))
	for i, m := range mix {
		parts[i] = m.SLO.String() + ":" + strconv.FormatFloat(m.Share, 'g', -1, 64)
	}
	return strings.Join(parts, "/")
}
