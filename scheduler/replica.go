package scheduler

import (
	"fmt"
	"math"
	"time"
)

// What several scheduler replicas exchange to agree (through the state
// package, or the simulator's model of it): each replica reports its own
// load per instance (Instances), the blocks it dispatched (the caller sees
// them as EnqueueAndWait or Submit returns, or as their Waiter is told) and its key-depth splits (KeyDepthState); it
// applies the others' with the methods below. The local view then lags the
// others by the exchange interval, never the replica's own decisions.

// SetRemoteLoad sets the other replicas' combined load on instance id, which
// every policy adds to this replica's own.
func (s *Scheduler) SetRemoteLoad(id string, l Load) error {
	if l.Queued < 0 || l.QueuedTokens < 0 || l.PendingTokens < 0 || l.Running < 0 {
		return fmt.Errorf("scheduler: remote load for %q: negative value in %+v", id, l)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	in.remote.store(l)
	return nil
}

// RemoteBounds fills dst, for every instance, with the most load the
// other replicas together may count for there when replicas replicas share
// the pool, this one included (fewer than 2 count as 2): the other
// replicas' share, (replicas-1)/replicas, of what the instance can hold, so
// that whatever they claim this replica keeps its own share, 1/replicas, of
// each limit its admission rule applies. What an instance can hold:
//
//   - Running and Queued: its running limit (Queue.MaxRunning, else the
//     larger of Cost.MaxSeqs and the most its engine was seen running
//     with a queue);
//   - PendingTokens: the admission rule's token budget (Queue.Budget, or
//     under Queue.Adaptive the work ahead the learned cost lets through
//     in SLOShare of the SLO), and never more than its KV capacity;
//   - QueuedTokens: its KV capacity (Cost.KVTokens, else its cache
//     capacity in tokens).
//
// A replica that claims more (a bug, or a writer of the shared store that
// is no replica) cannot hold this replica's requests in the router: the
// caller clamps each replica's claim and their sum to these bounds (package
// coord does, and counts the clamps). Honest replicas are clamped only when
// this one has less than its share in flight, and then by at most its
// share: the instance may briefly hold up to 1/replicas more than its limit.
func (s *Scheduler) RemoteBounds(dst map[string]Load, replicas int) {
	replicas = max(replicas, 2)
	share := func(v int) int { return int(int64(v) * int64(replicas-1) / int64(replicas)) }
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.members {
		run := s.cfg.Queue.MaxRunning
		if run <= 0 {
			run = max(in.est.cfg.MaxSeqs, in.engineSlots.get())
		}
		kv := s.cfg.Cost.KVTokens
		if kv <= 0 {
			kv = in.CacheTokens
			if kv <= 0 {
				kv = s.cfg.CacheTokens
			}
		}
		pending := kv
		if b := s.cfg.Queue.Budget; b > 0 {
			pending = min(pending, b)
		}
		if a := in.est.ahead.cost(); s.cfg.Queue.Adaptive && a > 0 {
			if t := s.aheadBudget() / a; t < float64(pending) {
				pending = int(t)
			}
		}
		dst[in.ID] = Load{Queued: share(run), QueuedTokens: share(kv), PendingTokens: share(pending), Running: share(run)}
	}
}

// Clamp returns l with each field cut to bound's, and whether it cut any.
func (l Load) Clamp(bound Load) (Load, bool) {
	c := Load{
		Queued: min(l.Queued, bound.Queued), QueuedTokens: min(l.QueuedTokens, bound.QueuedTokens),
		PendingTokens: min(l.PendingTokens, bound.PendingTokens), Running: min(l.Running, bound.Running),
	}
	return c, c != l
}

// RecordCached records that instance id was sent a prompt with these
// chained blocks by another replica at time at, as if this replica had
// dispatched it: the blocks join the instance's cache index, and the blocks
// it did not hold yet (whole blocks: the prompt's length is not shared) join
// its windowed load (Preble's signal), aged from at, so that history replayed
// after a restart does not count as fresh load. A zero or future at means
// now.
func (s *Scheduler) RecordCached(id string, blocks []uint64, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	now := s.now()
	in.mu.Lock()
	defer in.mu.Unlock()
	add := float64((len(blocks) - in.kv.cachedBlocks(blocks)) * s.cfg.BlockSize)
	if !at.IsZero() {
		if age := now - at.Sub(s.epoch); age > 0 {
			add *= math.Exp(-float64(age) / float64(prebleWindow))
		}
	}
	in.addRecentLocked(now, add)
	in.kv.add(blocks)
	return nil
}

// AddCached records that instance id holds a prompt with these chained
// blocks in its KV cache: they join its cache index, most recent. It is how
// the caller keeps the index with Config.ReportedCache; unlike
// RecordCached it adds no load.
func (s *Scheduler) AddCached(id string, blocks []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	in.addKV(blocks)
	return nil
}

// LocalLoad returns this replica's own load on every instance, by id.
func (s *Scheduler) LocalLoad(dst map[string]Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.members {
		dst[in.ID] = Load{Queued: in.nqueued.get(), QueuedTokens: in.onTimeTokens.get(), PendingTokens: in.pendingTokens.get(), Running: in.running.get()}
	}
}

// AnyReadyOf returns a ready instance among the members only names (all
// when only is empty) for requests that carry no prompt (model listings,
// health probes): the (n mod ready)-th of them, so callers spread them by
// passing a counter or a request hash; ErrNoEndpoint when none is ready.
func (s *Scheduler) AnyReadyOf(n uint64, only []string) (string, error) {
	p := s.pick.Load()
	ready, nready := p.ready, p.nready
	if len(only) > 0 {
		ready, nready = p.restrict(&Request{Only: only})
	}
	if nready == 0 {
		return "", ErrNoEndpoint
	}
	k := int(n % uint64(nready))
	for i, ok := range ready {
		if ok {
			if k == 0 {
				return p.members[i].ID, nil
			}
			k--
		}
	}
	return "", ErrNoEndpoint
}

// SetEngineLoad records the load instance id reports about itself (its
// metrics endpoint). A longer engine queue than the router's estimate makes
// the instance look that busy (see instance.ahead).
func (s *Scheduler) SetEngineLoad(id string, l EngineLoad) error {
	if l.Waiting < 0 || l.Running < 0 {
		return fmt.Errorf("scheduler: engine load for %q: negative value in %+v", id, l)
	}
	if !(l.KVUsage >= 0 && l.KVUsage <= 1) {
		return fmt.Errorf("scheduler: engine load for %q: kv usage %g is outside [0, 1]", id, l.KVUsage)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	in.mu.Lock() // the counts since the report restart with it
	in.engineWaiting.set(l.Waiting)
	in.engineRunning.set(l.Running)
	in.engineKV.set(l.KVUsage)
	in.sinceReport.dispatched.set(0)
	in.sinceReport.completed.set(0)
	// The running limit: the most seen running with a queue.
	if l.Waiting > 0 && l.Running > in.engineSlots.get() {
		in.engineSlots.set(l.Running)
	}
	in.mu.Unlock()
	return nil
}
