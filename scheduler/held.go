package scheduler

import "fmt"

// Held requests and the cache lookup of later arrivals.
//
// An instance's cache index (kvindex.go) records a prompt's blocks when it
// is dispatched. A request held in the router queue (queue.go) leaves no
// trace there, so without more the next request of its prefix group finds
// no cached prefix on any candidate, is routed by load, and lands on
// another candidate than its group-mate: the group is split, and each part
// pays the shared prefix's prefill. Each instance therefore also keeps the
// blocks of the requests held in its queue (heldIndex, reference counted:
// a block stays while any held request has it). The cache lookup the
// policies read (view.cached) is the longer of the two prefixes, the
// cached one and the held one: a held block will be cached by the time a
// request queued behind its holder is served. The blocks join the set when
// a request is queued and leave it when it leaves the queue, whatever the
// reason (dispatched, cancelled, expired, shed, migrated, re-routed); on
// dispatch the cache index takes over (in exact mode and with
// Config.ReportedCache the engine's report does, later). They also leave
// it when the queue finds the request late (queue.go), except where late
// requests are served at once (lateServed, admission.go): it then waits
// behind every request that can still make its SLO, so its prefix is not
// coming soon, and a group-mate that followed it would wait as long or
// compute the prefix itself on a busier instance (in the simulator
// counting late requests lost 2.8 points of SLO attainment on the
// conversation trace at 1.2x saturation). Requests dispatched at once,
// without waiting, never enter the set.
//
// QueueConfig.Held chooses what counts. By default (HeldOn) the held
// prefix counts for the cache comparison only: the TTFT estimates, the
// queue's priority and its queued work still count it as the request's
// own, uncached, work. That charges the prefix twice when the holder is
// served first (its prefill is also in the work ahead), but the queue does
// not promise that order, and a request credited with a prefix that is
// not computed yet jumps the queue by its cached-first priority and passes
// the admission budget with more work than it declared; in the simulator
// counting it for the estimate too (HeldEstimate) did worse on most
// workloads (docs/evaluation.md). The rebalancer does not move a held
// request away from the instance where its group's other held requests
// wait, onto one that lacks their shared prefix, unless the request would
// miss its SLO where it is or has waited OldestWait (HeldSplit lets it).

// QueueConfig.Held values.
const (
	// HeldOn (default): held blocks count for the cache comparison of the
	// policies; TTFT estimates, queue priority and queued work count them
	// as uncached. The rebalancer keeps held groups together.
	HeldOn = "on"
	// HeldEstimate: as HeldOn, and held blocks also count as cached for
	// the estimates, the queue's priority and its queued work.
	HeldEstimate = "estimate"
	// HeldSplit: as HeldOn, but the rebalancer does not keep held groups
	// together.
	HeldSplit = "split"
	// HeldOff: held requests' blocks are not tracked (the scheduler before
	// held requests counted).
	HeldOff = "off"
)

func validateHeld(h string) error {
	switch h {
	case HeldOn, HeldEstimate, HeldSplit, HeldOff:
		return nil
	}
	return fmt.Errorf("queue.held must be %q, %q, %q or %q, got %q", HeldOn, HeldEstimate, HeldSplit, HeldOff, h)
}

// heldIndex is the set of blocks of the requests held in one instance's
// router queue, each with the number of held requests that have it. Every
// request adds a prefix of its blocks, so the set is prefix-closed for
// each of them, as kvIndex is, and so is its subset of blocks two or more
// requests have. One writer at a time (the instance's lock); heldBlocks may
// run concurrently with it, without a lock (see blockSet). It holds at most
// the instance's cache capacity in distinct blocks: a request that would
// add more adds the prefix that fits.
type heldIndex struct {
	refs blockSet // block hash -> held requests that have it
}

// add records a held request's blocks, at most limit distinct blocks in
// all, and returns how many of its leading blocks it recorded: the caller
// passes those to remove.
func (h *heldIndex) add(blocks []uint64, limit int) int {
	for i, b := range blocks { // shallowest first: a reader never sees a block without its prefix
		n, ok := h.refs.get(b)
		if !ok && h.refs.len() >= limit {
			return i
		}
		h.refs.put(b, n+1)
	}
	return len(blocks)
}

// remove forgets one held request's recorded blocks (what add returned).
func (h *heldIndex) remove(blocks []uint64) {
	for i := len(blocks) - 1; i >= 0; i-- { // deepest first, for the same reason
		b := blocks[i]
		switch n, ok := h.refs.get(b); {
		case !ok:
		case n <= 1:
			h.refs.remove(b)
		default:
			h.refs.put(b, n-1)
		}
	}
}

// heldBlocks returns how many leading blocks of a prompt some held request
// has. It does not lock or allocate.
func (h *heldIndex) heldBlocks(blocks []uint64) int { return h.refs.prefixLen(blocks) }

// sharedBlocks returns how many leading blocks of a prompt at least two
// held requests have: for a held request, the prefix it shares with
// others held at the same instance. Writer only.
func (h *heldIndex) sharedBlocks(blocks []uint64) int {
	lo, hi := 0, len(blocks)
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if n, _ := h.refs.get(blocks[m-1]); n >= 2 {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// len returns the number of distinct blocks held. Writer only.
func (h *heldIndex) len() int { return h.refs.len() }

// lookupTokens estimates how many of r's prompt tokens the instance will
// hold when r is served there: its cached prefix, or the prefix of a
// request held in its queue if that is longer.
func (in *instance) lookupTokens(r *Request, blockSize int) int {
	n := in.kv.cachedBlocks(r.Blocks)
	if in.nqueued.get() > 0 {
		n = max(n, in.held.heldBlocks(r.Blocks))
	}
	return min(n*blockSize, r.Tokens)
}

// hold records r, queued at in, in in's held index. The caller holds
// in.mu.
func (s *Scheduler) hold(in *instance, r *Request) {
	if s.cfg.Queue.Held == HeldOff {
		return
	}
	r.held = in.held.add(r.Blocks, in.kv.capacity)
}

// release takes r, leaving in's queue, out of in's held index. The caller
// holds in.mu.
func (s *Scheduler) release(in *instance, r *Request) {
	in.held.remove(r.Blocks[:r.held])
	r.held = 0
}

// estCached is the cached prefix r's own work is estimated with on in:
// the cached one, or under HeldEstimate the lookup's.
func (s *Scheduler) estCached(in *instance, r *Request) int {
	if s.cfg.Queue.Held == HeldEstimate {
		return in.lookupTokens(r, s.cfg.BlockSize)
	}
	return in.cachedTokens(r, s.cfg.BlockSize)
}

// splitsGroup reports whether moving r, held at src, to an instance where
// to of its tokens are cached or held would split its group: r shares a
// longer prefix with the other requests held at src than src has cached
// (so whichever of them is served first computes it for the others) and
// than to has (so r would compute it again there). A prefix src has
// cached already costs the others nothing when r leaves: the move's
// estimated benefit counts r's own prefill at to. The caller holds src.mu.
func (s *Scheduler) splitsGroup(r *Request, src *instance, to int) bool {
	if s.cfg.Queue.Held != HeldOn && s.cfg.Queue.Held != HeldEstimate {
		return false
	}
	shared := min(src.held.sharedBlocks(r.Blocks[:r.held])*s.cfg.BlockSize, r.Tokens)
	return shared > to && shared > src.cachedTokens(r, s.cfg.BlockSize)
}
