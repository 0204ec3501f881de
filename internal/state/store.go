package state

import (
	"context"
	"errors"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
)

// Store is one replica's end of a pool's shared state: the Transport its
// coord.Coordinator runs over (with the dispatch records it shares:
// Dispatched takes a short in-memory lock; the buffer is bounded, identical
// waiting records are coalesced, and when it is full the oldest records are
// dropped and counted), and the loops that drive the Coordinator's rounds.
// All methods are safe for concurrent use.
type Store interface {
	coord.Transport
	// Run is the background work: it publishes this replica's records and
	// runs c's rounds (Sync every c.Heartbeat(), Receive continuously). c
	// must run over this store. Run blocks until ctx ends, then makes c
	// leave the pool and returns nil; Redis failures never make it return.
	// It returns an error at once only when misused (a nil Coordinator, or
	// a second concurrent Run).
	Run(ctx context.Context, c *coord.Coordinator) error
	// Stats returns a snapshot of the counters. It does not block on I/O.
	Stats() Stats
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
	// ErrNoCoordinator is returned by Run when given a nil Coordinator.
	ErrNoCoordinator = errors.New("state: nil Coordinator")
	// ErrUnavailable is returned when Redis could not answer in time.
	ErrUnavailable = errors.New("state: redis unavailable")
	// ErrInvalidLease is returned by TryLease for an empty instance or a
	// ttl below one millisecond.
	ErrInvalidLease = errors.New("state: invalid lease")
)

// Stats is a snapshot of a Store's counters: the transport's. Counters are
// cumulative since the store was created. What the coordination did
// (leader, replicas seen, records applied) is in the Coordinator's Stats.
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

	// Errors counts failed Redis operations, including malformed entries
	// and values.
	Errors uint64

	// RefusedReplies counts Redis connections closed because a reply
	// announced more than MaxReplyBytes or MaxReplyElements, or was not
	// RESP (each also counts in Errors and starts an outage).
	RefusedReplies uint64
	// What was read from Redis and not used as it was (see the package
	// doc, Limits). Malformed counts values and stream entries that did
	// not decode (also in Errors), skipped. Oversized counts key-depth
	// tables above MaxKeyDepthBytes, not read. Clamped counts load values
	// with a field above MaxLoadRequests or MaxLoadTokens, and key-depth
	// tables unsorted with duplicates or above MaxSplits, cut to size, and
	// heartbeats with more live replicas than MaxReplicas.
	// Ignored counts replicas scored in the future (dropped from
	// T:replicas) and load hashes without an expiry (not read). BadClock
	// counts dispatch batches stamped in the future or before 1970, whose
	// age was clamped.
	Malformed, Oversized, Clamped, Ignored, BadClock uint64
	// Unsigned counts, with RecordKeys, other replicas' states that did
	// not open under the keys (no seal, a wrong MAC, written more than
	// RecordMaxAge from now) and legacy load hashes, not read.
	Unsigned uint64

	// Panics counts background rounds (heartbeat, read, publish) that
	// panicked: each is logged at Error with its stack, and the loop goes
	// on with backoff.
	Panics uint64

	// PropagationLast is the delay of the last batch received: from when
	// its oldest record was recorded on the other replica to when it was
	// read here (and handed to the Coordinator to apply). PropagationP50
	// and PropagationP99 are over the last PropagationWindow batches read
	// live (not the warm-up backlog).
	PropagationLast, PropagationP50, PropagationP99 time.Duration
}
