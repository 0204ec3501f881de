package scheduler

// freeSlot is DualMap's way out of a full engine (our decision, not the
// paper's). An engine runs at most so many requests at once (vLLM's
// max_num_seqs, learned in slots.go); a request sent to one that runs that
// many waits in the engine's own queue for the first of its slots to free,
// where the router can no longer move it. The cache-first choice accepts
// that wait until its estimate passes headroom x SLO, which on an engine
// that holds few sequences (llm-d's simulator, 16) is never: with prefixes
// concentrated on a few instances, requests queued in those engines while
// other engines had free slots in 73-79% of the samples that showed a
// queue (tool&agent at 70% of capacity; docs/evaluation.md, "Free slots").
//
// freeSlot returns, when the chosen instance's engine is full (its estimate
// counts a wait for a slot), the ready instance with a free slot, nothing
// held for it in the router queue and the lowest estimated TTFT for r, if
// that is lower than the choice's own; else -1. Both estimates price r's
// own uncached tokens as the reach does (reprice); the free instance's at
// the cost busyFit (busyfit.go) has learned for a start beside the
// requests in flight there, so a long cached prefix is given up only for a
// wait that costs more than prefilling it again where r would go. The
// chosen one's stay at the fit's average: priced at its limit, the most
// expensive point of busyFit, the wait looked worth a move for the mostly
// uncached prompts of the conversation trace, 33-86 moves a run at 100-150%
// of capacity, and the free instances, holding few but long requests, ran
// out of KV cache (9-15 requests failed a run at 150% against 0-3). The
// free instance's estimate also counts what the move costs the others: what
// that prefill delays the requests in prefill there, at the learned cost
// of a token of work ahead, and the reuse given up (the chosen one's
// cached tokens that the free one lacks) once more at that cost, the slot
// time its second prefill takes from the pool's later requests. Without
// that second count, on llm-d's simulator at 70% of the shared-prefix
// workload's capacity, 11-16 requests a run left the instance holding
// their group's 2,400-token prompt for one about to fill, for an
// estimated gain of a tenth of a second: 2-3 points of the pool's hit rate
// for no TTFT (docs/evaluation.md, "A free slot's price"). Where the
// choice's estimate has no slot wait nothing changes.
//
// It applies only where the admission fit (admission.go) has identified an
// engine that prefills requests in parallel (a token of work ahead costs a
// request less than half of what one of its own does, as on llm-d's
// simulator). On a step-bound engine (vLLM with chunked prefill, the
// simulator's engine) a second prefill takes step budget from every
// request on the free instance for as long as it runs: in the simulator's
// matrix, four routers lost 8% on bursty traffic with the rule applied
// there too. The fit reads this replica's work ahead apart from the
// others' (seconds old, it flattened the slope: four routers exchanging
// every 2 s lost 3.4% on that traffic while the rule read the whole).
// With several replicas an instance counts as free
// only with a slot for each of the others as well, which may see it free
// at the same time. It runs only in pools of at most d.Reach ready
// instances, and does not allocate.
func (d *dualMap) freeSlot(v *view, r *Request, chosen int32) int32 {
	if v.nready > int(d.Reach) {
		return -1
	}
	in := v.members[chosen]
	lc := in.load()
	if !in.est.ahead.parallel() || in.est.slotWait(lc) == 0 {
		return -1
	}
	spare := in.otherReplicas() // a slot for each, which may see it free too
	held := v.cached(chosen, r)
	best, bestT := int32(-1), v.ttft(chosen, r, held)+in.reprice(r.Tokens-held)
	for i, m := range v.members {
		c := int32(i)
		if !v.ready[i] || c == chosen || m.nqueued.get()+m.remote.Queued.get() > 0 {
			continue
		}
		l := m.load()
		l.occupied += spare
		if m.est.slotWait(l) > 0 {
			continue
		}
		cached := v.cached(c, r)
		u := r.Tokens - cached
		own := m.ownAt(m.est.startRunning(l))
		t := v.ttft(c, r, cached) + m.repriceAt(own, u) + m.est.ahead.slope()*float64(u*l.requests)
		// The reuse given up, again: its second prefill holds a slot
		// there that long, which the pool's later requests lose.
		t += own * float64(max(held-cached, 0))
		if t < bestT {
			best, bestT = c, t
		}
	}
	return best
}
