package sim

import "github.com/dualmap/dualmap/sim/trace"

// upperBound is the cache hit rate an infinite single cache would reach on
// the measured requests, in the same units as Result.CacheHitRate: prompts
// truncated to the profile's max model length, hits counted as the longest
// prefix of blocks any earlier request had (warm-up included), at most all
// but one token (the engine always computes one).
func upperBound(tr *trace.Trace, o Options) float64 {
	bs, maxLen := o.Profile.BlockSize, o.Profile.MaxModelLen
	seen := make(map[uint64]struct{}, len(tr.Requests)*8)
	var prompt, cached int64
	for i, r := range tr.Requests {
		tokens, blocks := r.InputTokens, r.Blocks
		if maxLen > 0 && tokens > maxLen {
			tokens = maxLen
			blocks = blocks[:min(len(blocks), (maxLen+bs-1)/bs)]
		}
		hit := 0
		for hit < len(blocks) {
			if _, ok := seen[blocks[hit]]; !ok {
				break
			}
			hit++
		}
		for _, b := range blocks {
			seen[b] = struct{}{}
		}
		if i < o.Warmup {
			continue
		}
		prompt += int64(tokens)
		cached += int64(min(hit*bs, tokens-1))
	}
	if prompt == 0 {
		return 0
	}
	return float64(cached) / float64(prompt)
}
