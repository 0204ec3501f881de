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

// Another replica's load can hold this replica's requests in the router
// (issue 24: a writer of the shared store heartbeating 5,000 of everything
// on every instance made every request wait and fail). Two bounds keep
// that within what honest replicas could do:
//
//   - RemoteBounds is what an instance can hold at all: the caller cuts
//     each replica's claim, and their sum, to it before SetRemoteLoad
//     (package coord does, and counts the cuts). Running and Queued: its
//     running limit (Queue.MaxRunning, else the larger of Cost.MaxSeqs and
//     the most its engine was seen running with a queue); PendingTokens
//     and QueuedTokens: its KV capacity (Cost.KVTokens, else its cache
//     capacity in tokens).
//   - With SetReplicas(n), n >= 2, the admission rule counts the others'
//     running requests and pending prefill for at most their share,
//     (n-1)/n, of each limit it applies (Queue.MaxRunning, Queue.Budget,
//     the adaptive rule's token budget at the learned cost), so that this
//     replica always has its own share, 1/n: whatever the others claim,
//     it dispatches that much. An instance may then hold up to 1/n more
//     than a limit when honest replicas are unevenly loaded; estimates and
//     rebalancing read the others' load as reported (within RemoteBounds).

// RemoteBounds fills dst, for every instance, with the most load the
// other replicas together can hold there (see above).
func (s *Scheduler) RemoteBounds(dst map[string]Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.members {
		run := s.runLimit(in)
		kv := s.cfg.Cost.KVTokens
		if kv <= 0 {
			kv = in.CacheTokens
			if kv <= 0 {
				kv = s.cfg.CacheTokens
			}
		}
		dst[in.ID] = Load{Queued: run, QueuedTokens: kv, PendingTokens: kv, Running: run}
	}
}

// runLimit is what instance in runs at once as far as the scheduler knows.
func (s *Scheduler) runLimit(in *instance) int {
	if m := s.cfg.Queue.MaxRunning; m > 0 {
		return m
	}
	return max(in.est.cfg.MaxSeqs, in.engineSlots.get())
}

// SetReplicas records that n replicas share the pool, this one included
// (the admission rule leaves this one 1/n of each limit; see above). Fewer
// than 2 turn the share off: the others' load counts whole, as before any
// call.
func (s *Scheduler) SetReplicas(n int) { s.replicas.Store(int64(n)) }

// othersShare returns v, the others' figure against limit, cut to their
// share of it under SetReplicas (v itself without one, or without a limit).
func (s *Scheduler) othersShare(v int, limit float64) int {
	n := s.replicas.Load()
	if n < 2 || !(limit > 0) || math.IsInf(limit, 0) {
		return v
	}
	if c := limit * float64(n-1) / float64(n); float64(v) > c {
		return int(c)
	}
	return v
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
	if !in.exact { // the engine's own report holds what it caches
		in.kv.add(blocks)
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.engineReport(id, l)
	if err != nil {
		return err
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
	in.slotLimit.report(s.now(), l)
	in.mu.Unlock()
	return nil
}

// SetEngineLimit records a report of instance id's own load for what it
// shows of the engine's running limit only (slots.go): nothing else of it
// enters the estimates or admission. Use one of SetEngineLoad and
// SetEngineLimit per instance. It returns how soon the next report of id
// can teach the limit (confirmIn): 0 unless the report showed a queue that
// has yet to last; a poller that comes back then learns it sooner.
func (s *Scheduler) SetEngineLimit(id string, l EngineLoad) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.engineReport(id, l)
	if err != nil {
		return 0, err
	}
	now := s.now()
	in.mu.Lock()
	first := in.slotLimit.learn(now, l, &s.poolSlots)
	again := in.confirmIn(now)
	in.mu.Unlock()
	if first {
		s.est.unlearnWaits()
		for _, m := range s.members {
			m.est.unlearnWaits()
		}
	}
	return again, nil
}

// engineReport validates a report of instance id's load and returns the
// instance. The caller holds s.mu.
func (s *Scheduler) engineReport(id string, l EngineLoad) (*instance, error) {
	if l.Waiting < 0 || l.Running < 0 {
		return nil, fmt.Errorf("scheduler: engine load for %q: negative value in %+v", id, l)
	}
	if !(l.KVUsage >= 0 && l.KVUsage <= 1) {
		return nil, fmt.Errorf("scheduler: engine load for %q: kv usage %g is outside [0, 1]", id, l.KVUsage)
	}
	in := s.byID[id]
	if in == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownInstance, id)
	}
	return in, nil
}
