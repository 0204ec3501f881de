package scheduler

import "slices"

// holder is DualMap's reach outside the candidate set. A request's key is
// its first key blocks (KeyDepthConfig), so requests that share a prefix
// shorter than the key hash to unrelated candidate sets, and whatever
// instance first computed that prefix is in none of them: the second
// request prefills the shared part again. Peers that score every instance
// by its cached prefix (llm-d's prefix scorer) keep that reuse.
//
// holder returns the ready instance outside cands whose cached prefix of r
// is longer than every candidate's (maxCached) by more than tie x the
// prompt and whose estimated TTFT is the lowest of those and below that of
// the choice inside the set (pick, holding pickCached of r), or -1. Going
// there is a lower estimate, never a cache-first hotspot: a holder's queue
// that grows past the candidates' sends its prefix back into the set. A
// holder whose estimate misses the SLO is not taken: past saturation the
// set and its rebalancer decide, as without the reach.
//
// Both estimates price r's own uncached tokens at what a token of a
// request's own prompt is measured to cost (the admission fit's own slope)
// where that is above the estimator's per-token cost. The estimator learns
// one cost for the work ahead and a request's own tokens; on an engine that
// prefills many requests at once the work ahead costs far less than its
// share of the estimate, so that cost settles well below what a token of
// one's own costs (7x below on llm-d's simulator), and a cached prefix
// would look worth little against the smallest difference in load.
//
// The search looks up one block per ready member (the first one a longer
// prefix must hold) and the whole prefix only where that block is, and
// runs only in pools of at most d.Reach ready instances. It does not
// allocate.
func (d *dualMap) holder(v *view, r *Request, cands []int32, maxCached int, pick int32, pickCached int, pickEst float64) int32 {
	if v.nready > int(d.Reach) || len(r.Blocks) == 0 {
		return -1
	}
	floor := maxCached + int(d.Tie*float64(r.Tokens))
	k := floor / v.blockSize // a prefix longer than floor holds block k
	if k >= len(r.Blocks) || floor >= r.Tokens {
		return -1
	}
	held := v.held != HeldOff
	best, bestT := int32(-1), pickEst+v.members[pick].reprice(r.Tokens-pickCached)
	for i, in := range v.members {
		c := int32(i)
		if !v.ready[i] || !in.holdsBlock(r.Blocks[k], held) || slices.Contains(cands, c) {
			continue
		}
		cached := v.cached(c, r)
		if cached <= floor {
			continue
		}
		if t := v.ttft(c, r, cached) + in.reprice(r.Tokens-cached); t < bestT && t <= v.slo {
			best, bestT = c, t
		}
	}
	return best
}

// holdsBlock reports whether in's cache index, or with held its held index
// while requests wait there, has block h. It does not lock or allocate.
func (in *instance) holdsBlock(h uint64, held bool) bool {
	return in.kv.slot.contains(h) || held && in.nqueued.get() > 0 && in.held.refs.contains(h)
}

// reprice is what uncached tokens of a request's own add to in's estimate
// when priced at the admission fit's own slope instead of the estimator's
// per-token cost, where the slope is the higher (0 until it is identified).
func (in *instance) reprice(uncached int) float64 {
	return in.repriceAt(in.est.ahead.own(), uncached)
}

// repriceAt is reprice at a learned cost of own seconds a token.
func (in *instance) repriceAt(own float64, uncached int) float64 {
	return max(own-in.est.cost(), 0) * float64(uncached)
}
