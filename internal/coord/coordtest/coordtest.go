// Package coordtest holds fixtures for testing replica coordination: a fake
// scheduler, a settable clock, and one scenario that any coord.Transport
// must play out the same way (the in-process hub here, Redis in package
// state).
package coordtest

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
)

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Unix(1_000_000, 0)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Cached is one RecordCached call.
type Cached struct {
	Instance string
	Blocks   []uint64
	At       time.Time
}

// Scheduler is a coord.Scheduler whose own load, key-depth table and
// planned moves the test sets, and which records what a Coordinator did to
// it. Safe for concurrent use.
type Scheduler struct {
	mu       sync.Mutex // guards the fields below
	ids      []string
	local    map[string]scheduler.Load
	remote   map[string]scheduler.Load
	splits   []uint64
	plan     []scheduler.Move
	applied  []scheduler.Move
	cached   []Cached
	bound    *scheduler.Load // RemoteBounds' bound; nil: unbounded
	replicas int             // the last SetReplicas
}

var _ coord.Scheduler = (*Scheduler)(nil)

// NewScheduler returns a fake scheduler of the given instances.
func NewScheduler(instances ...string) *Scheduler {
	return &Scheduler{ids: instances, local: map[string]scheduler.Load{}, remote: map[string]scheduler.Load{}}
}

func (s *Scheduler) known(id string) bool { return slices.Contains(s.ids, id) }

// SetLocal sets this replica's own load on instance id.
func (s *Scheduler) SetLocal(id string, l scheduler.Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.local[id] = l
}

// SetBound makes RemoteBounds report b for every instance
// (NewScheduler's is no bound at all).
func (s *Scheduler) SetBound(b scheduler.Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bound = &b
}

// Replicas returns the count of the last SetReplicas call (0 before any).
func (s *Scheduler) Replicas() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas
}

// SetReplicas implements coord.Scheduler: it records n.
func (s *Scheduler) SetReplicas(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas = n
}

// RemoteBounds implements coord.Scheduler: SetBound's bound, or none.
func (s *Scheduler) RemoteBounds(dst map[string]scheduler.Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := scheduler.Load{Queued: math.MaxInt, QueuedTokens: math.MaxInt, PendingTokens: math.MaxInt, Running: math.MaxInt}
	if s.bound != nil {
		b = *s.bound
	}
	for _, id := range s.ids {
		dst[id] = b
	}
}

// SetPlan sets the moves Plan returns.
func (s *Scheduler) SetPlan(moves ...scheduler.Move) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = slices.Clone(moves)
}

// Remote returns the remote loads set so far, by instance.
func (s *Scheduler) Remote() map[string]scheduler.Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.remote)
}

// TakeApplied returns the moves applied since the last call.
func (s *Scheduler) TakeApplied() []scheduler.Move {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.applied
	s.applied = nil
	return out
}

// TakeCached returns the RecordCached calls since the last call.
func (s *Scheduler) TakeCached() []Cached {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.cached
	s.cached = nil
	return out
}

// LocalLoad implements coord.Scheduler: every instance, zero where unset.
func (s *Scheduler) LocalLoad(dst map[string]scheduler.Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		dst[id] = s.local[id]
	}
}

// SetRemoteLoad implements coord.Scheduler.
func (s *Scheduler) SetRemoteLoad(id string, l scheduler.Load) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known(id) {
		return scheduler.ErrUnknownInstance
	}
	s.remote[id] = l
	return nil
}

// RecordCached implements coord.Scheduler.
func (s *Scheduler) RecordCached(id string, blocks []uint64, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known(id) {
		return scheduler.ErrUnknownInstance
	}
	s.cached = append(s.cached, Cached{Instance: id, Blocks: slices.Clone(blocks), At: at})
	return nil
}

// KeyDepthState implements coord.Scheduler.
func (s *Scheduler) KeyDepthState() scheduler.KeyDepthState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return scheduler.KeyDepthState{Splits: slices.Clone(s.splits)}
}

// ImportKeyDepth implements coord.Scheduler.
func (s *Scheduler) ImportKeyDepth(st scheduler.KeyDepthState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.splits = slices.Clone(st.Splits)
}

// Plan implements coord.Scheduler.
func (s *Scheduler) Plan() []scheduler.Move {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.plan)
}

// Apply implements coord.Scheduler: every move is made.
func (s *Scheduler) Apply(moves []scheduler.Move) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, moves...)
	return len(moves)
}
