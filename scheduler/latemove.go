package scheduler

// Late requests follow their prefix (our decision, not the paper's).
//
// Under the deadline order (queue.go) a request held in a router queue is
// late once its wait plus its own prefill exceed its SLO: it has missed it
// wherever it goes, and what is left to save is the work of serving it.
// The rebalancer's usual move (rebalance.go) gains TTFT and must meet the
// SLO, so a late request never moves, and its prefix is dropped from its
// instance's held blocks (held.go: it waits behind every request that can
// still make its SLO). The next request of its prefix then finds it nowhere
// and is routed by load, often to another candidate, which computes the
// prefix; when the late request is served at last, on its own instance, it
// computes the prefix a second time. On long shared documents under
// overload that doubled prefill is most of what a cold start costs (in the
// simulator, 38 of 52 repeated document prefills in the first 100 s were
// this; docs/evaluation.md, "Late requests follow their prefix").
//
// So a rebalancing round moves a late request to the candidate that holds
// the longest cached prefix of its prompt, when that saves at least half of
// the prefill left at its own instance, at least a block, and, at the
// learned cost per token, at least lateMinSaving of its SLO. It waits
// there as a late request, and is served there with that prefix cached.
// The move is taken whether or not its instance is over the rebalancer's
// thresholds (a late request has waited its SLO, more than OldestWait by
// default), after the round's moves of requests that can still make their
// SLO, and it counts in neither instance's load for the round (late work
// counts in no one's ahead()). A smaller saving does not pay: late
// requests gathered on the instances holding their prefixes are served
// there one after another when those go idle, instead of on whichever
// instance goes idle first. With four routers on bursty tool&agent
// traffic, moving for any longer prefix cost 3-5% of goodput, for half of
// the prefill left 1.4% (six seeds), and with the SLO share too the
// goodput is 2.2% above not moving. Only the request's candidates are searched: a
// few cache lookups per late request and round. Each move at least halves
// the request's uncached work, so it moves a bounded number of times
// between evictions.

// lateMinSaving is the least prefill time, as a share of the request's
// SLO, a late request's move must save.
const lateMinSaving = 0.2

// lateMove returns the move of r, late and held at src, to the candidate
// that holds the longest cached prefix of its prompt, if that saves at
// least half of r's prefill at src, a block, and lateMinSaving of its SLO
// (ok false if none does). The caller holds src.mu.
func (s *Scheduler) lateMove(r *Request, src *instance) (Move, bool) {
	have := s.estCached(src, r)
	var best Move
	found := false
	for k := 0; k < r.ncand; k++ {
		to := r.cand[k]
		if to == src || !to.ready() || !r.allows(to) {
			continue
		}
		c := s.estCached(to, r)
		if c-have < max(s.cfg.BlockSize, (r.Tokens-have)/2) || (found && c <= best.toCached) {
			continue
		}
		saved := to.est.cost() * float64(c-have)
		if saved < lateMinSaving*s.sloOf(r).Seconds() {
			continue
		}
		best = Move{Request: r, From: src.ID, To: to.ID, Benefit: seconds(saved), from: src, to: to, toCached: c, late: true}
		found = true
	}
	return best, found
}
