package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// Hotspot-aware rebalancing (DualMap paper §3.4): cuckoo-style migration of
// queued requests inside their candidate set, without recursive eviction.
//
// An instance is a hotspot when its queued plus pending prefill exceeds
// PendingTokens (default: the work it can clear within the SLO, SLO / its
// per-token cost) or its oldest queued request waited OldestWait. For each
// request queued there, the benefit of moving it to its best other
// candidate j is
//
//	B = TTFT(r, source) - TTFT(r, j)
//
// and a move is allowed when B > 0 and TTFT(r, j) is within what is left of
// r's SLO after its wait. Both estimates price r's uncached tokens as the
// reach does (reprice, reach.go): at the admission fit's measured cost of a
// token of a request's own where that is above the estimate's per-token
// cost. On an engine that prefills in parallel (llm-d's simulator) the
// estimate's cost, learned with the step model, was a fifth of that, and
// moves off a hotspot prefilled their group's prompt again elsewhere for a
// gain they did not get (docs/evaluation.md, "Late requests on a parallel
// engine"). A request that can no longer make it anywhere
// (late, under the deadline order) moves only to a candidate that holds a
// longer cached prefix of it, whatever the thresholds (latemove.go): its
// TTFT is lost, its prefill can still be saved.
// Moves are taken in descending B, re-checked against the loads the
// earlier moves of the round left, while the source is still over its
// threshold (a request that itself waited OldestWait may move after that).
// One bounded round (MaxMoves) per Tick. Only candidates are targets unless
// Neighbor is set (the authors' code also tried source+1 mod n, which breaks
// the pair's cache locality; off by default).
//
// Plan and Apply are separate so that several replicas can agree on which
// moves to make (through shared state) before any is made.

// RebalanceConfig configures the rebalancer. Zero values mean defaults.
type RebalanceConfig struct {
	// PendingTokens is the hotspot threshold in tokens of queued plus
	// pending prefill (default 0: SLO / the instance's per-token cost).
	PendingTokens int
	// OldestWait marks an instance whose oldest queued request waited this
	// long as a hotspot (default 3s; negative: off).
	OldestWait time.Duration
	// MaxMoves bounds one round (default 64).
	MaxMoves int
	// Neighbor allows the next member (in ring-member order) as a target
	// when no candidate accepts a request.
	Neighbor bool
	// External leaves rebalancing to the caller: Tick does not run it, the
	// caller runs Plan and Apply (several replicas agree on the moves in
	// between, e.g. through leases on the source instances).
	External bool
}

func (c RebalanceConfig) withDefaults() RebalanceConfig {
	if c.OldestWait == 0 {
		c.OldestWait = 3 * time.Second
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 64
	}
	return c
}

func (c RebalanceConfig) validate() error {
	switch {
	case c.PendingTokens < 0:
		return fmt.Errorf("rebalance.pending_tokens must be >= 0, got %d", c.PendingTokens)
	case c.MaxMoves < 0:
		return fmt.Errorf("rebalance.max_moves must be >= 0, got %d", c.MaxMoves)
	}
	return nil
}

// Move is one planned migration.
type Move struct {
	Request  *Request
	From, To string
	// Benefit is the estimated TTFT saved when planned.
	Benefit time.Duration

	from, to *instance
	toCached int
	late     bool // a late request following its prefix (latemove.go)
}

// Plan returns the moves one rebalancing round would make now, without
// making them. The slice is the caller's.
func (s *Scheduler) Plan() []Move {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.plan(s.now()))
}

// Apply makes the moves that are still valid (request still queued at From,
// To still ready) and returns how many it made. Migrated requests that
// become dispatchable are dispatched (their waiters are told).
func (s *Scheduler) Apply(moves []Move) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply(moves, s.now())
}

func (s *Scheduler) threshold(in *instance) int {
	if t := s.cfg.Rebalance.PendingTokens; t > 0 {
		return t
	}
	return int(s.cfg.SLO.Seconds() / in.est.cost())
}

// plan fills s.moves. The result aliases scheduler scratch space.
func (s *Scheduler) plan(now time.Duration) []Move {
	s.moves = s.moves[:0]
	clear(s.added)
	for _, src := range s.members {
		s.planFrom(src, now)
	}
	return s.moves
}

// planFrom adds to s.moves the moves away from src. It holds src's lock
// while it reads src's queue (the caller holds s.mu).
func (s *Scheduler) planFrom(src *instance, now time.Duration) {
	cfg := &s.cfg.Rebalance
	if !src.ready() || len(s.moves) >= cfg.MaxMoves {
		return
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.queue) == 0 {
		return
	}
	thr := s.threshold(src)
	oldest := time.Duration(0)
	late := false
	for _, r := range src.queue {
		oldest = max(oldest, now-r.enqueued)
		late = late || s.lateHere(r, src, now)
	}
	stuck := cfg.OldestWait > 0 && oldest >= cfg.OldestWait
	if src.ahead() <= thr && !stuck && !late {
		return
	}
	first := len(s.moves)
	for _, r := range src.queue {
		if m, ok := s.bestMove(r, src, src.ahead(), now); ok {
			s.moves = append(s.moves, m)
		}
	}
	cand := s.moves[first:]
	slices.SortFunc(cand, func(a, b Move) int {
		if a.late != b.late { // requests that can still make their SLO first
			if b.late {
				return -1
			}
			return 1
		}
		if a.Benefit != b.Benefit {
			if a.Benefit > b.Benefit {
				return -1
			}
			return 1
		}
		return int(a.Request.enqueued - b.Request.enqueued)
	})
	// Greedy, re-checked against the loads earlier moves left.
	load := src.ahead()
	kept := first
	for _, m := range cand {
		if kept >= cfg.MaxMoves {
			break
		}
		r := m.Request
		waitedOut := cfg.OldestWait > 0 && now-r.enqueued >= cfg.OldestWait
		if load <= thr && !waitedOut && !m.late {
			continue
		}
		m2, ok := s.bestMove(r, src, load, now)
		if !ok {
			continue
		}
		if !m2.late { // a late request's work counts in no one's ahead()
			load -= r.uncached
			s.added[m2.to.idx] += r.Tokens - m2.toCached
		}
		s.moves[kept] = m2
		kept++
	}
	s.moves = s.moves[:kept]
}

// bestMove returns the most beneficial allowed move of r away from src,
// whose queued plus pending work is srcLoad; for a late r, lateMove's.
func (s *Scheduler) bestMove(r *Request, src *instance, srcLoad int, now time.Duration) (Move, bool) {
	if s.lateHere(r, src, now) {
		return s.lateMove(r, src)
	}
	slo := s.left(r, now)
	from := src.ttftAt(srcLoad-r.uncached, r.uncached) + src.reprice(r.uncached)
	// r stays with the other held requests of its group (held.go) while
	// it can make its SLO there and has not waited OldestWait.
	ow := s.cfg.Rebalance.OldestWait
	keep := from <= slo && !(ow > 0 && now-r.enqueued >= ow)
	var best Move
	found := false
	try := func(to *instance) {
		if to == src || !to.ready() || !r.allows(to) {
			return
		}
		if keep && s.splitsGroup(r, src, to.lookupTokens(r, s.cfg.BlockSize)) {
			return
		}
		cached := s.estCached(to, r)
		t := to.ttftAt(to.ahead()+s.added[to.idx], r.Tokens-cached) + to.reprice(r.Tokens-cached)
		b := from - t
		if b <= 0 || t > slo || (found && seconds(b) <= best.Benefit) {
			return
		}
		best = Move{Request: r, From: src.ID, To: to.ID, Benefit: seconds(b), from: src, to: to, toCached: cached}
		found = true
	}
	for k := 0; k < r.ncand; k++ {
		try(r.cand[k])
	}
	if !found && s.cfg.Rebalance.Neighbor && len(s.members) > 1 {
		try(s.members[(src.idx+1)%len(s.members)])
	}
	return best, found
}

func (s *Scheduler) apply(moves []Move, now time.Duration) int {
	n := 0
	for i := range moves {
		m := &moves[i]
		r := m.Request
		// r.inst changes only under s.mu, which we hold; r.state under
		// r.inst's lock.
		if m.from == nil || r.inst != m.from || m.to == nil || !m.to.ready() {
			continue
		}
		lockPair(m.from, m.to)
		if r.state != stateQueued {
			unlockPair(m.from, m.to)
			continue
		}
		s.dequeue(r)
		r.dec.Fallback = m.from.ID
		r.dec.Reason = ReasonMigrated
		r.setInst(m.to)
		r.cached = s.estCached(m.to, r)
		r.uncached = r.Tokens - r.cached
		r.dec.Instance = m.to.ID
		r.dec.CachedTokens = r.cached
		r.dec.EstimatedTTFT = seconds(m.to.ttft(r.uncached))
		s.enqueue(m.to, r, now)
		s.stats.Migrations.Add(1)
		n++
		if m.from != m.to {
			m.from.mu.Unlock()
		}
		s.drain(m.to, now)
		m.to.mu.Unlock()
	}
	return n
}

// lockPair locks two instances (or one, if a == b) in lock order.
func lockPair(a, b *instance) {
	switch {
	case a == b:
		a.mu.Lock()
	case a.seq < b.seq:
		a.mu.Lock()
		b.mu.Lock()
	default:
		b.mu.Lock()
		a.mu.Lock()
	}
}

func unlockPair(a, b *instance) {
	a.mu.Unlock()
	if a != b {
		b.mu.Unlock()
	}
}
