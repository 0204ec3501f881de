package scheduler

import "fmt"

// An instance's cache index holds what the router predicts it caches
// (every dispatched prompt's blocks, and other replicas' through
// RecordCached) unless the engine reports its cache itself: KV-cache
// events say which blocks it stored and removed, and while such a
// subscription is healthy the instance's view is exact (SetExact): the
// index then holds the reported blocks only, and dispatches add nothing
// to it. Policies read the index the same way in both views.

// SetExact sets whether instance id's cache index is the engine's own
// report (exact) or the router's prediction. Turning it on does not
// change the index (the caller clears it first when its report starts
// from nothing); turning it off lets dispatches add to it again.
func (s *Scheduler) SetExact(id string, exact bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return errUnknown(id)
	}
	in.mu.Lock()
	in.exact = exact
	in.mu.Unlock()
	return nil
}

// RemoveCached takes blocks out of instance id's cache index (the engine
// evicted them). Blocks it does not hold are ignored.
func (s *Scheduler) RemoveCached(id string, blocks []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return errUnknown(id)
	}
	in.mu.Lock()
	for _, h := range blocks {
		in.kv.remove(h)
	}
	in.mu.Unlock()
	return nil
}

// ClearCached empties instance id's cache index (the engine restarted or
// cleared its cache).
func (s *Scheduler) ClearCached(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.byID[id]
	if in == nil {
		return errUnknown(id)
	}
	in.mu.Lock()
	in.kv.clear()
	in.mu.Unlock()
	return nil
}

func errUnknown(id string) error { return fmt.Errorf("%w %q", ErrUnknownInstance, id) }
