package coord

import (
	"context"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Transport is how a Coordinator reaches the other replicas of its pool:
// Redis between processes (package state) or a Hub inside one process.
//
// A Coordinator calls Beat and Collect from its Sync, Receive from its
// Receive and TryLease from its Rebalance; the three may run concurrently
// with each other (each from its own goroutine). Every method may block on
// I/O until ctx ends and returns the transport's error as it is: retrying
// and backing off are the caller's.
type Transport interface {
	// Replica returns this replica's id, unique in the pool.
	Replica() string
	// Beat writes this replica's presence and load for b.TTL, replacing
	// what it wrote before, takes the key-depth leader lease for b.TTL (or
	// renews it for its holder), and returns what it saw.
	Beat(ctx context.Context, b Beat) (Seen, error)
	// Collect returns the load of each of replicas that is still present
	// (one whose presence expired since Beat is left out) and, when t is
	// not nil, publishes t as the pool's key-depth table.
	Collect(ctx context.Context, replicas []string, t *Table) ([]Peer, error)
	// Receive returns the dispatch batches the other replicas published
	// since the last call, oldest first (nil when there are none). It may
	// wait a short while for the first one.
	Receive(ctx context.Context) ([]Batch, error)
	// TryLease takes a lease of ttl on a source instance, or extends it for
	// its holder. It returns false while another replica holds it.
	TryLease(ctx context.Context, instance string, ttl time.Duration) (bool, error)
	// Leave removes this replica's presence and releases the key-depth
	// lease if it holds it, so that the others stop counting its load and
	// another replica can lead at once.
	Leave(ctx context.Context) error
	// Dispatched records that blocks (a prompt's chained block hashes) went
	// to instance, for the other replicas' Receive. It copies blocks, never
	// blocks on I/O and never fails (a transport that cannot keep a record
	// drops it and counts it). A Coordinator calls it from its Dispatched
	// and Served, concurrently with everything else.
	Dispatched(instance string, blocks []uint64)
}

// Beat is what a replica writes every heartbeat.
type Beat struct {
	// Load is this replica's own load per instance. The transport must not
	// keep the map.
	Load map[string]scheduler.Load
	// TTL is how long the presence, the load and the key-depth leader
	// lease last without another beat (3 heartbeats).
	TTL time.Duration
	// Period is the heartbeat period (Redis writes it with the presence).
	Period time.Duration
}

// Seen is what a beat saw.
type Seen struct {
	// Members are the live replicas, this one included.
	Members []string
	// Leader is true when this replica holds the key-depth leader lease.
	Leader bool
	// Table is the published key-depth table; nil when there is none (or
	// it does not decode: the leader overwrites it).
	Table *Table
}

// Table is the key-depth table the leader publishes.
type Table struct {
	// Splits are the chained hashes of split prefixes, ascending.
	Splits []uint64
	// Version increases with every publication.
	Version int64
	// Leader is the publishing replica's id.
	Leader string
}

// Peer is another replica's load, per instance.
type Peer struct {
	Replica string
	Load    map[string]scheduler.Load
}

// Batch is dispatch records one replica published together.
type Batch struct {
	// Replica is the publishing replica's id.
	Replica string
	// At is when the oldest record was recorded: they are aged from then.
	At      time.Time
	Records []Record
}

// Record is one dispatch: a prompt's chained blocks sent to an instance.
type Record struct {
	Instance string
	Blocks   []uint64
}
