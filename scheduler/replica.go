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
