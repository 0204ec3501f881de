package scheduler

import "time"

// Explain is what a routing decision looked at, for tracing: the candidate
// set with each candidate's cached prefix, work ahead and estimated TTFT
// when the request was placed. Set Request.Explain to one (owned by the
// caller) to have it filled; a nil Request.Explain costs nothing. It is
// filled at each placement of the request (routing, re-routing), so it
// shows the last one; a migration by the rebalancer does not refill it.
type Explain struct {
	// Candidates[:N] are the candidates in ring order.
	Candidates [maxCandidates]Candidate
	N          int
	// Chosen is the index in Candidates of the instance the policy chose,
	// or -1 when it chose outside the set (overflow to the pool's best, or
	// a holder of a longer cached prefix: the reach).
	Chosen int
}

// Candidate is one member of a request's candidate set as the decision saw it.
type Candidate struct {
	ID string
	// CachedTokens is the prefix of the request the router expects the
	// instance to hold in its KV cache.
	CachedTokens int
	// PendingTokens is the prefill work ahead of the request there: queued
	// in the router and dispatched, of every replica, or the engine's own
	// report of waiting requests, whichever is larger.
	PendingTokens int
	// EstimatedTTFT is the estimated time to first token there.
	EstimatedTTFT time.Duration
	// BusyExtra is what the instance's busy fit adds to that estimate for
	// the request's uncached tokens there, beside the requests it would
	// start with (busyfit.go); 0 unless the engine was measured to prefill
	// requests side by side. DualMap's choice adds it for a prompt cold on
	// every candidate only (coldPick), so there the chosen candidate is
	// the one with the lowest EstimatedTTFT + BusyExtra.
	BusyExtra time.Duration
}

// explain fills e from a placement's candidates; chosen is the member index
// the policy chose.
func (p *picker) explain(e *Explain, r *Request, cands []int32, chosen int32) {
	e.N, e.Chosen = len(cands), -1
	for k, c := range cands {
		in := p.members[c]
		cached := r.pview.cached(c, r)
		uncached := r.pview.uncachedFor(c, r, cached)
		e.Candidates[k] = Candidate{ID: in.ID, CachedTokens: cached, PendingTokens: in.load().ahead,
			EstimatedTTFT: seconds(in.ttft(uncached)), BusyExtra: seconds(in.busyExtra(uncached))}
		if c == chosen {
			e.Chosen = k
		}
	}
}
