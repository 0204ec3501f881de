package scheduler

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Router-side queues (DualMap paper §3.3, and our decision there). Each
// instance has a queue in the router. A request routed to an instance is
// dispatched at once while the instance's pending prefill (uncached tokens
// dispatched and not yet through prefill, by this replica and, as last
// reported, by the others) stays within Budget, and always when nothing is
// pending; otherwise it waits here, where it can still be
// migrated to its other candidate, instead of in the engine's FCFS queue,
// where it cannot.
//
// The queue dispatches the request with the highest priority
//
//	priority = cached tokens + AgingRate x seconds waited
//
// so cache-rich requests (cheap to serve) go first, as in the authors' code,
// but nothing starves: a request that has waited w seconds outranks every
// request that arrives later once AgingRate x w exceeds the largest cached
// prefix any request can have, so under saturation it is dispatched within
// (max cached tokens / AgingRate) plus the time to drain the finitely many
// requests that arrived before it.
//
// With Order = OrderDeadline (the default) the queue is also SLO-aware: a
// request is late when what is left of its TTFT SLO is less than its own
// prefill alone (it has missed the SLO), or, once first tokens have taught
// the router how the engines answer, less than its instance's TTFT
// estimate for it dispatched now (late, onTime). Late requests go behind
// every request that can still make it; by default
// (Late = LateIdle) they are dispatched only to an idle instance (no
// prefill pending, few requests in flight), so under overload the engine
// spends its capacity on requests that can still meet the SLO instead of on
// ones that have missed it (whose answers would also slow every decode step
// for minutes), and a late request is still served when load drops (or
// fails after MaxWait) rather than dropped. Under cache-first order alone a
// saturated instance serves everything late once its backlog exceeds the
// SLO (docs/evaluation.md compares the two orders in the simulator).

// ErrQueueTimeout is the error of a request that waited longer than
// Queue.MaxWait.
var ErrQueueTimeout = errors.New("scheduler: queue wait limit exceeded")

// ErrShed is returned for a sheddable request (Request.Priority < 0) that
// would have to wait in a router queue.
var ErrShed = errors.New("scheduler: sheddable request shed: the instances are saturated")

// QueueConfig configures the router-side queues. Zero values mean defaults.
type QueueConfig struct {
	// Budget is the pending prefill, in tokens, an instance may hold before
	// new requests wait in the router (default 0: no router queue, every
	// request is dispatched at once, as a plain load balancer does). It is
	// the instance's budget, shared by all replicas: the pending prefill
	// other replicas last reported (SetRemoteLoad) counts against it, for
	// at most their share under SetReplicas.
	Budget int
	// AgingRate is the priority, in tokens, a waiting request gains per
	// second (default 4096).
	AgingRate float64
	// MaxWait bounds the wait in a router queue; Tick fails requests that
	// waited longer with ErrQueueTimeout (default 0: no bound).
	MaxWait time.Duration
	// Order is the dispatch order: OrderDeadline (default) or OrderCache.
	Order string
	// Late says what OrderDeadline does with a request that can no longer
	// meet its SLO: LateIdle (default), LateServe or LateReject.
	Late string
	// IdleRunning: under LateIdle an instance is idle when it has no
	// prefill pending and fewer than IdleRunning requests in flight
	// (default 8). A late request dispatched to a busy engine still
	// decodes there for its whole answer, slowing every step of the
	// requests that could make their SLO.
	IdleRunning int
	// MaxRunning is the engines' limit on requests running at once
	// (vLLM's max_num_seqs). An instance with this many requests in flight,
	// across replicas, is sent no more until one completes: the engine could
	// not start them, and in the router they can still be reordered or
	// migrated (default 0: no limit); the others' requests count for at
	// most their share under SetReplicas. Only with a router queue.
	MaxRunning int
	// Adaptive turns on the router queue with the adaptive admission rule
	// of admission.go instead of a fixed Budget (which must then be 0): a
	// request waits in the router only while its instance's engine reports
	// a queue of its own, or while the prefill work ahead there, at the
	// cost of work ahead the router has learned from observed TTFTs, would
	// take more than SLOShare of the SLO. Until there is such evidence
	// every request is dispatched at once.
	Adaptive bool
	// SLOShare is, under Adaptive, the share of the default TTFT SLO
	// (Config.SLO) that the work ahead on an instance may take before
	// requests wait in the router (default 0.125).
	SLOShare float64
	// Held says whether the blocks of requests held in a router queue
	// count for the cache lookup of later arrivals on their instance
	// (held.go): HeldOn (default: for the cache comparison), HeldEstimate,
	// HeldSplit or HeldOff.
	Held string
}

// Queue orders.
const (
	// OrderCache dispatches by cached tokens plus aging only.
	OrderCache = "cache"
	// OrderDeadline dispatches the requests that can still meet their TTFT
	// SLO before those that cannot, each group in OrderCache's order.
	OrderDeadline = "deadline"

	// LateServe dispatches late requests when no request that can still
	// make its SLO is waiting and the budget allows.
	LateServe = "serve"
	// LateIdle dispatches a late request only to an idle instance (no
	// prefill pending, fewer than IdleRunning requests in flight): late
	// work does not delay work that can be on time.
	LateIdle = "idle"
	// LateReject fails a request with ErrLate once it has missed its SLO
	// whatever happens next (its own prefill no longer fits what is left
	// of it); until then a late request waits as under LateIdle.
	LateReject = "reject"
)

// ErrLate is the error of a request rejected because it could no longer
// meet its SLO (QueueConfig.Late = LateReject).
var ErrLate = errors.New("scheduler: request can no longer meet its TTFT SLO")

func (c QueueConfig) withDefaults() QueueConfig {
	if c.AgingRate == 0 {
		c.AgingRate = 4096
	}
	if c.Order == "" {
		c.Order = OrderDeadline
	}
	if c.Late == "" {
		c.Late = LateIdle
	}
	if c.IdleRunning == 0 {
		c.IdleRunning = 8
	}
	if c.SLOShare == 0 {
		c.SLOShare = 0.125
	}
	if c.Held == "" {
		c.Held = HeldOn
	}
	return c
}

func (c QueueConfig) validate() error {
	switch {
	case c.Budget < 0:
		return fmt.Errorf("queue.budget must be >= 0 tokens, got %d", c.Budget)
	case c.AgingRate < 0:
		return fmt.Errorf("queue.aging_rate must be >= 0, got %g", c.AgingRate)
	case c.MaxWait < 0:
		return fmt.Errorf("queue.max_wait must be >= 0, got %v", c.MaxWait)
	case c.Order != OrderCache && c.Order != OrderDeadline:
		return fmt.Errorf("queue.order must be %q or %q, got %q", OrderDeadline, OrderCache, c.Order)
	case c.MaxRunning < 0:
		return fmt.Errorf("queue.max_running must be >= 0, got %d", c.MaxRunning)
	case c.IdleRunning < 0:
		return fmt.Errorf("queue.idle_running must be >= 0, got %d", c.IdleRunning)
	case c.Adaptive && c.Budget > 0:
		return fmt.Errorf("queue.budget (%d tokens) and queue.adaptive are exclusive: a fixed budget or the adaptive rule", c.Budget)
	case !(c.SLOShare > 0 && c.SLOShare <= 1):
		return fmt.Errorf("queue.slo_share must be in (0, 1], got %g", c.SLOShare)
	case c.Late != LateServe && c.Late != LateIdle && c.Late != LateReject:
		return fmt.Errorf("queue.late must be %q, %q or %q, got %q", LateServe, LateIdle, LateReject, c.Late)
	}
	if c.Held != "" {
		return validateHeld(c.Held)
	}
	return nil
}

// enqueue puts r in in's queue. The caller holds in.mu (and r's previous
// instance's, if any).
func (s *Scheduler) enqueue(in *instance, r *Request, now time.Duration) {
	if r.state != stateQueued { // a migrated request keeps its wait
		r.enqueued = now
	}
	r.state = stateQueued
	r.setInst(in)
	r.qpos = len(in.queue)
	in.queue = append(in.queue, r)
	s.hold(in, r)
	in.nqueued.set(len(in.queue))
	in.queuedTokens.add(r.uncached)
	in.syncOnTime()
	r.dec.Queued = true
}

// dequeue removes a queued r from its instance's queue. The caller holds
// that instance's lock.
func (s *Scheduler) dequeue(r *Request) {
	in := r.inst
	last := len(in.queue) - 1
	moved := in.queue[last]
	in.queue[r.qpos] = moved
	moved.qpos = r.qpos
	in.queue[last] = nil
	in.queue = in.queue[:last]
	s.release(in, r)
	in.nqueued.set(last)
	in.queuedTokens.add(-r.uncached)
	if len(in.queue) == 0 {
		in.lateTokens.set(0)
	}
	in.lateTokens.set(min(in.lateTokens.get(), in.queuedTokens.get()))
	in.syncOnTime()
}

// queues reports whether requests may wait in router queues.
func (s *Scheduler) queues() bool { return s.cfg.Queue.Budget > 0 || s.cfg.Queue.Adaptive }

// admissible reports whether r may be dispatched to in now.
func (s *Scheduler) admissible(in *instance, r *Request) bool {
	if s.cfg.Queue.Adaptive {
		return s.admitAdaptive(in, r)
	}
	b := s.cfg.Queue.Budget
	p := in.pendingTokens.get() + s.othersShare(in.remote.PendingTokens.get(), float64(b))
	if m := s.cfg.Queue.MaxRunning; m > 0 && in.running.get()+s.othersShare(in.remote.Running.get(), float64(m)) >= m {
		return false
	}
	return b == 0 || p == 0 || p+r.uncached <= b
}

// lateRank is subtracted from the priority of a request that can no longer
// meet its SLO: more than any cached prefix plus a day of aging.
const lateRank = 1e15

func (s *Scheduler) priority(in *instance, r *Request, now time.Duration) float64 {
	p := float64(r.cached) + s.cfg.Queue.AgingRate*(now-r.enqueued).Seconds()
	if s.lateHere(r, in, now) {
		p -= lateRank
	}
	return p
}

// idle reports whether in may take a late request under LateIdle.
func (s *Scheduler) idle(in *instance) bool {
	if s.cfg.Queue.Adaptive {
		return s.idleAdaptive(in)
	}
	return in.pendingTokens.get() == 0 && in.inFlight() < s.cfg.Queue.IdleRunning
}

// late reports whether r can no longer be expected to meet its SLO at in:
// it has missed it whatever happens next (missed), or, once the router has
// learned from first tokens how this pool's engines answer (aheadFit's own
// cost is identified), what is left of it is less than in's TTFT estimate
// for r dispatched now (onTime). A request near its deadline that the
// engine could still serve in time keeps its place; one the engine would
// only serve late (taking a slot and slowing every decode step for its
// answer) goes behind those that can still make it. Until the fit is
// identified the estimate is the configured prior's, a guess about an
// engine the router has not seen, and only missed counts.
func (s *Scheduler) late(in *instance, r *Request, now time.Duration) bool {
	left := s.left(r, now)
	return s.missed(in, r, left) || !s.onTime(in, r, left)
}

// left is what is left of r's SLO at now, in seconds.
func (s *Scheduler) left(r *Request, now time.Duration) float64 {
	return (s.sloOf(r) - (now - r.arrived)).Seconds()
}

// onTime reports whether r, with left seconds of its SLO left, can still
// be served in time at in by the estimate: in's TTFT estimate for r
// dispatched now, behind the prefill this replica has pending there (the
// others' as last reported is up to a heartbeat old, and stale figures
// judged requests late that were not), with the engine's decode batch,
// slot wait and memory pressure, but not the router queue's work, whose
// order is the queue's business. The pending prefill counts at what the
// fit measured a token of work ahead to cost a first token, relative to a
// token of the request's own (never more than one): an engine that
// prefills requests side by side delays a request far less for each
// pending token than for its own, and pending tokens that were in fact
// cached (a lost or late cache-index record) delay it by nothing. The
// estimate's per-token cost is learned from its own errors, starting from
// the configured prior; where it runs above the fit's measured cost of a
// token of the request's own (a prior that is off, or errors the estimate
// makes with several replicas), the estimate is scaled down by their
// ratio. Without an identified fit every request is on time.
func (s *Scheduler) onTime(in *instance, r *Request, left float64) bool {
	own := in.est.ahead.own()
	if own <= 0 {
		return true
	}
	share := 1.0 // a fit that is not a number counts the pending prefill whole
	if f := in.est.ahead.slope() / own; f < 1 {
		share = f
	}
	t := in.ttftAt(int(float64(in.pendingTokens.get())*share), r.uncached)
	if c := in.est.cost(); c > own {
		t *= own / c
	}
	return left >= t
}

// missed reports whether r, with left seconds of its SLO left, has missed
// it whatever happens next: its own prefill exceeds what is left, even on
// an idle instance (LateReject fails only those). The prefill is costed at
// the lower of the learned and the prior per-token cost: with several
// replicas the learned cost also absorbs work this replica does not see and
// runs high, and a request rejected by mistake is lost.
func (s *Scheduler) missed(in *instance, r *Request, left float64) bool {
	return left < min(in.est.cost(), s.cfg.Cost.PerToken)*float64(r.uncached)
}

// lateHere reports whether r, held at in, is late under the deadline
// order (the only order that has late requests).
func (s *Scheduler) lateHere(r *Request, in *instance, now time.Duration) bool {
	return s.cfg.Queue.Order == OrderDeadline && s.late(in, r, now)
}

// top returns the index of the request to dispatch next from in's queue:
// the highest Request.Priority first, then the queue order (priority). It
// also refreshes in.lateTokens, the queued tokens of late requests.
func (s *Scheduler) top(in *instance, now time.Duration) int {
	best := 0
	bp := math.Inf(-1)
	bclass := math.MinInt
	late := 0
	for i, r := range in.queue {
		p := s.priority(in, r, now)
		if p < -lateRank/2 {
			late += r.uncached
			if !s.lateServed(in) {
				s.release(in, r) // held.go: its prefix is not coming soon
			}
		}
		if r.Priority > bclass || r.Priority == bclass && (p > bp || (p == bp && r.enqueued < in.queue[best].enqueued)) {
			best, bp, bclass = i, p, r.Priority
		}
	}
	in.lateTokens.set(late)
	in.syncOnTime()
	return best
}

// drain dispatches from in's queue, best first, while the head fits the
// budget. The head is never skipped for a smaller request behind it, so a
// large prompt is not overtaken forever. An instance that takes no more
// requests dispatches none: its queue is being re-routed. The caller holds
// in.mu.
func (s *Scheduler) drain(in *instance, now time.Duration) {
	if !in.accepting {
		return
	}
	deadline := s.cfg.Queue.Order == OrderDeadline
	for len(in.queue) > 0 {
		r := in.queue[s.top(in, now)]
		if deadline && s.cfg.Queue.Late != LateServe && s.late(in, r, now) {
			if s.cfg.Queue.Late == LateReject && s.missed(in, r, s.left(r, now)) {
				s.dequeue(r)
				r.state = stateDone
				s.stats.Late.Add(1)
				r.notifyFailed(ErrLate)
				continue
			}
			if !s.idle(in) {
				return
			}
		}
		if !s.admissible(in, r) {
			return
		}
		s.dequeue(r)
		s.dispatch(in, r, now)
	}
}

// expire fails requests that waited longer than MaxWait.
func (s *Scheduler) expire(now time.Duration) {
	for _, in := range s.members {
		in.mu.Lock()
		for i := 0; i < len(in.queue); {
			r := in.queue[i]
			if now-r.enqueued <= s.cfg.Queue.MaxWait {
				i++
				continue
			}
			s.dequeue(r) // swaps another request into slot i
			r.state = stateDone
			s.stats.Expired.Add(1)
			r.notifyFailed(ErrQueueTimeout)
		}
		in.mu.Unlock()
	}
}

// QueueLen returns the number of requests waiting in router queues.
func (s *Scheduler) QueueLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, in := range s.members {
		n += in.nqueued.get()
	}
	return n
}
