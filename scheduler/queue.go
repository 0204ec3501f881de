package scheduler

import (
	"errors"
	"fmt"
	"time"
)

// Router-side queues (DualMap paper §3.3, and our decision there). Each
// instance has a queue in the router. A request routed to an instance is
// dispatched at once while the instance's pending prefill (uncached tokens
// dispatched and not yet through prefill) stays within Budget, and always
// when nothing is pending; otherwise it waits here, where it can still be
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

// ErrQueueTimeout is the Failure.Err of a request that waited longer than
// Queue.MaxWait.
var ErrQueueTimeout = errors.New("scheduler: queue wait limit exceeded")

// QueueConfig configures the router-side queues. Zero values mean defaults.
type QueueConfig struct {
	// Budget is the pending prefill, in tokens, an instance may hold before
	// new requests wait in the router (default 0: no router queue, every
	// request is dispatched at once, as a plain load balancer does).
	Budget int
	// AgingRate is the priority, in tokens, a waiting request gains per
	// second (default 4096).
	AgingRate float64
	// MaxWait bounds the wait in a router queue; Tick fails requests that
	// waited longer with ErrQueueTimeout (default 0: no bound).
	MaxWait time.Duration
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.AgingRate == 0 {
		c.AgingRate = 4096
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
	}
	return nil
}

func (s *Scheduler) enqueue(in *instance, r *Request, now time.Duration) {
	if r.state != stateQueued { // a migrated request keeps its wait
		r.enqueued = now
	}
	r.state = stateQueued
	r.inst = in
	r.qpos = len(in.queue)
	in.queue = append(in.queue, r)
	in.queuedTokens += r.uncached
	r.dec.Queued = true
}

// dequeue removes a queued r from its instance's queue.
func (s *Scheduler) dequeue(r *Request) {
	in := r.inst
	last := len(in.queue) - 1
	moved := in.queue[last]
	in.queue[r.qpos] = moved
	moved.qpos = r.qpos
	in.queue[last] = nil
	in.queue = in.queue[:last]
	in.queuedTokens -= r.uncached
}

func (s *Scheduler) admissible(in *instance, r *Request) bool {
	b := s.cfg.Queue.Budget
	return b == 0 || in.pendingTokens == 0 || in.pendingTokens+r.uncached <= b
}

func (s *Scheduler) priority(r *Request, now time.Duration) float64 {
	return float64(r.cached) + s.cfg.Queue.AgingRate*(now-r.enqueued).Seconds()
}

// top returns the index of the request to dispatch next from in's queue.
func (s *Scheduler) top(in *instance, now time.Duration) int {
	best := 0
	bp := s.priority(in.queue[0], now)
	for i := 1; i < len(in.queue); i++ {
		r := in.queue[i]
		p := s.priority(r, now)
		if p > bp || (p == bp && r.enqueued < in.queue[best].enqueued) {
			best, bp = i, p
		}
	}
	return best
}

// drain dispatches from in's queue, best first, while the head fits the
// budget. The head is never skipped for a smaller request behind it, so a
// large prompt is not overtaken forever.
func (s *Scheduler) drain(in *instance, now time.Duration, out *Outcome) {
	for len(in.queue) > 0 {
		r := in.queue[s.top(in, now)]
		if !s.admissible(in, r) {
			return
		}
		s.dequeue(r)
		s.dispatch(in, r, now, out)
	}
}

// expire fails requests that waited longer than MaxWait.
func (s *Scheduler) expire(now time.Duration, out *Outcome) {
	for _, in := range s.members {
		for i := 0; i < len(in.queue); {
			r := in.queue[i]
			if now-r.enqueued <= s.cfg.Queue.MaxWait {
				i++
				continue
			}
			s.dequeue(r) // swaps another request into slot i
			r.state = stateDone
			s.stats.Expired++
			if out != nil {
				out.Failed = append(out.Failed, Failure{Request: r, Err: ErrQueueTimeout})
			}
		}
	}
}

// QueueLen returns the number of requests waiting in router queues.
func (s *Scheduler) QueueLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, in := range s.members {
		n += len(in.queue)
	}
	return n
}
