package state

import (
	"context"
	"errors"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Applier is what a Store feeds: the local scheduler (a *scheduler.Scheduler
// satisfies it). Its methods are called from Store.Run's goroutines, so they
// must be safe for concurrent use and must not block for long.
type Applier interface {
	RecordCached(id string, blocks []uint64, at time.Time) error
	SetRemoteLoad(id string, l scheduler.Load) error
	ImportKeyDepth(st scheduler.KeyDepthState)
	KeyDepthState() scheduler.KeyDepthState
	LocalLoad(dst map[string]scheduler.Load)
}

var _ Applier = (*scheduler.Scheduler)(nil)

// Store shares one pool's state between replicas. All methods are safe for
// concurrent use.
type Store interface {
	// Dispatched records that blocks (a prompt's chained block hashes) were
	// dispatched to instance, for the other replicas. It copies blocks,
	// never blocks on I/O (it takes a short in-memory lock) and never fails:
	// the buffer is bounded, identical waiting records are coalesced, and
	// when it is full the oldest records are dropped and counted.
	Dispatched(instance string, blocks []uint64)
	// Run is the background loop: it publishes this replica's records,
	// heartbeats its load, exchanges the key-depth table and applies the
	// other replicas' state to a. It blocks until ctx ends and then returns
	// nil; Redis failures never make it return. It returns an error at once
	// only when misused (a nil Applier, or a second concurrent Run).
	Run(ctx context.Context, a Applier) error
	// Stats returns a snapshot of the counters. It does not block on I/O.
	Stats() Stats
	// TryLease takes (or, for its holder, extends) a lease of ttl on a
	// source instance before this replica applies migrations from it. It
	// returns false when another replica holds the lease. It never blocks
	// longer than a short timeout (LeaseTimeout); on a Redis failure it
	// returns false and an error wrapping ErrUnavailable.
	TryLease(ctx context.Context, instance string, ttl time.Duration) (bool, error)
}

// LeaseTimeout bounds one TryLease call.
const LeaseTimeout = 250 * time.Millisecond

// Errors returned by this package, wrapped with context; test with
// errors.Is.
var (
	// ErrInvalidOptions is returned by NewRedis for unusable options.
	ErrInvalidOptions = errors.New("state: invalid options")
	// ErrRunning is returned by Run when the store is already running.
	ErrRunning = errors.New("state: Run already running")
	// ErrNoApplier is returned by Run when given a nil Applier.
	ErrNoApplier = errors.New("state: nil Applier")
	// ErrUnavailable is returned when Redis could not answer in time.
	ErrUnavailable = errors.New("state: redis unavailable")
	// ErrInvalidLease is returned by TryLease for an empty instance or a
	// ttl below one millisecond.
	ErrInvalidLease = errors.New("state: invalid lease")
)

// Stats is a snapshot of a Store's counters. Counters are cumulative since
// the store was created.
type Stats struct {
	// Up is true when the last Redis operation succeeded.
	Up bool
	// Outages counts transitions from up (or never connected) to down.
	Outages uint64
	// DownSince is when the current outage began; zero when up.
	DownSince time.Time

	// Buffered is the number of dispatch records waiting to be published.
	Buffered int
	// Published counts dispatch records written to Redis.
	Published uint64
	// Batches counts stream entries written.
	Batches uint64
	// Coalesced counts records merged into an identical waiting one.
	Coalesced uint64
	// Dropped counts records lost because the buffer was full.
	Dropped uint64

	// Applied counts other replicas' records applied with RecordCached.
	Applied uint64
	// Unknown counts other replicas' records for instances the Applier
	// does not have.
	Unknown uint64
	// Errors counts failed Redis operations, including malformed entries.
	Errors uint64

	// Replicas is the number of other live replicas seen at the last
	// heartbeat.
	Replicas int
	// Leader is true while this replica holds the key-depth leader lease.
	Leader bool
	// KeyDepthVersion is the version of the key-depth table last published
	// or imported.
	KeyDepthVersion int64

	// PropagationLast is the delay of the last applied batch: from when
	// its oldest record was recorded on the other replica to when it was
	// applied here. PropagationP50 and PropagationP99 are over the last
	// PropagationWindow batches applied live (not the warm-up backlog).
	PropagationLast, PropagationP50, PropagationP99 time.Duration
}
