// Package coord is how router replicas that run active-active agree: the
// logic of replica coordination, written once and run over a Transport.
//
// A Coordinator feeds one replica's scheduler. Its rounds are:
//
//   - Sync, every Heartbeat: this replica's presence and load go out; the
//     other live replicas' loads come back, summed per instance, to
//     SetRemoteLoad (zero where nobody reports, and zero for every instance
//     once the data is 3 heartbeats old). In the same round one replica
//     holds the key-depth leader lease: it publishes its key-depth table
//     with an increasing version; the others import it when the version
//     changed or their own table drifted from it. A replica that becomes
//     leader first adopts the published table (it may have just started,
//     with an empty one), then publishes its own as it evolves.
//   - Receive: the dispatch records the other replicas published are
//     applied with RecordCached, aged from when they were recorded.
//   - Rebalance, every scheduler tick: Plan locally, take a lease on each
//     source instance, Apply only the moves whose source lease this replica
//     holds, so that replicas do not all shed the same hotspot at once.
//
// Two transports carry it: Redis, between processes (package state, which
// keeps the keys, scripts, encodings, batching and outage handling), and a
// Hub, between replicas of one process, with an injected clock and an
// optional delivery delay: the simulator runs its replicas through the same
// Coordinator over a Hub, in simulated time, so that it measures the
// multi-replica code that serves.
//
// The package does not decide routes (package scheduler does), does not
// run goroutines or timers (its callers drive the rounds: state's loops in
// serve, the event loop in the simulator). Dispatch records go out through
// it: the caller tells it of each dispatch (Dispatched) and of a request
// served by another instance than the one it was sent to (Served), and the
// transport carries them.
package coord
