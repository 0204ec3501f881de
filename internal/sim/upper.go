package sim

import "github.com/dualmap/dualmap/internal/sim/trace"

// bounds are what no router can beat on a trace, whatever it knows: the
// cache hit rate of an infinite single cache, and the request rates at which
// the pool would be busy all the time even with that hit rate.
type bounds struct {
	// hitRate is in the units of Result.CacheHitRate: prompts truncated to
	// the profile's max model length, hits counted as the longest prefix of
	// blocks any earlier request had (warm-up included), at most all but
	// one token (the engine always computes one).
	hitRate float64
	// prefillQPS is the rate at which the instances spend all their time
	// on the measured requests' uncached prompt tokens (at hitRate): an
	// upper bound on any sustained rate at which first tokens keep up.
	prefillQPS float64
	// workQPS also counts decode, one DecodePerSeq per output token after
	// the first: above it the pool falls behind on the whole work. A finite
	// trace can still be served above it for a while (decode backlogs while
	// prefill keeps first tokens on time), so goodput may exceed it.
	workQPS float64
}

// upperBounds computes the bounds of tr's measured requests for o's profile
// and instance count (step overheads and the attention term left out, so
// the rates are upper bounds).
func upperBounds(tr *trace.Trace, o Options) bounds {
	p := o.Profile
	bs, maxLen := p.BlockSize, p.MaxModelLen
	seen := make(map[uint64]struct{}, len(tr.Requests)*8)
	var prompt, cached, n int64
	var prefill, decode float64
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
		c := min(hit*bs, tokens-1)
		prompt += int64(tokens)
		cached += int64(c)
		prefill += float64(tokens-c) * p.PrefillPerToken
		decode += float64(max(r.OutputTokens, 1)-1) * p.DecodePerSeq
		n++
	}
	var b bounds
	if prompt == 0 {
		return b
	}
	b.hitRate = float64(cached) / float64(prompt)
	if prefill > 0 {
		b.prefillQPS = float64(o.Instances) * float64(n) / prefill
	}
	if prefill+decode > 0 {
		b.workQPS = float64(o.Instances) * float64(n) / (prefill + decode)
	}
	return b
}
