package scheduler

import (
	"context"
	"sync"
)

// Waiter learns the fate of a request that Submit queued. The Scheduler
// calls exactly one of its methods, once, unless the request is cancelled
// or completed first. It is called with the Scheduler's locks held (the
// request's instance lock, and from Tick, Apply, SetInstances, SetHealthy
// and SetDraining the scheduler lock too), from whichever goroutine's call
// dispatched or failed the request: it must not block and must not call the
// Scheduler.
type Waiter interface {
	Dispatched(r *Request, d Decision)
	Failed(r *Request, err error)
}

func (r *Request) notifyDispatched() {
	if w := r.waiter; w != nil {
		r.waiter = nil
		w.Dispatched(r, r.dec)
	}
}

func (r *Request) notifyFailed(err error) {
	if w := r.waiter; w != nil {
		r.waiter = nil
		w.Failed(r, err)
	}
}

// EnqueueAndWait routes r and blocks until it is dispatched, shed or ctx
// ends. It returns the decision of a dispatched request; an error wrapping
// the reason when the scheduler sheds it (ErrNoEndpoint, ErrLate,
// ErrQueueTimeout, ErrShed) or cannot route it (ErrBadRequest); or ctx's
// error, after withdrawing r (from its queue, or releasing its load if it
// was dispatched as ctx ended). On every error path r holds nothing in the
// scheduler. After a decision the caller reports the request's progress
// with FirstToken and ends it with Complete or Cancel.
func (s *Scheduler) EnqueueAndWait(ctx context.Context, r *Request) (Decision, error) {
	w := waiters.Get().(*chanWaiter)
	defer waiters.Put(w)
	dec, err := s.Submit(r, w)
	if err != nil || !dec.Queued {
		return dec, err
	}
	select {
	case res := <-w.ch:
		return res.dec, res.err
	case <-ctx.Done():
		s.Cancel(r)
		// Cancel ran under the request's instance lock, as every delivery
		// does: a delivery either happened before it (and sits in the
		// channel) or never will. Empty the channel so
		// the waiter can be reused.
		select {
		case <-w.ch:
		default:
		}
		return Decision{}, ctx.Err()
	}
}

type waitResult struct {
	dec Decision
	err error
}

// chanWaiter hands a queued request's fate to the goroutine blocked in
// EnqueueAndWait. Its channel has room for the one delivery, so the
// Scheduler never blocks on it.
type chanWaiter struct{ ch chan waitResult }

func (w *chanWaiter) Dispatched(_ *Request, d Decision) { w.ch <- waitResult{dec: d} }
func (w *chanWaiter) Failed(_ *Request, err error)      { w.ch <- waitResult{err: err} }

var waiters = sync.Pool{New: func() any { return &chanWaiter{ch: make(chan waitResult, 1)} }}

var _ Waiter = (*chanWaiter)(nil)
