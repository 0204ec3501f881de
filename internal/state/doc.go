// Package state shares one pool's routing state between dualmap replicas
// that run active-active, so that they agree on where prompt prefixes are
// cached, how loaded each instance is, and which prefixes are split.
//
// It is the Redis transport of package internal/coord, which holds the
// logic of that agreement (what is summed, who leads, who may migrate) and
// feeds the local scheduler; this package keeps the Redis side: keys, Lua
// scripts, encodings, the batching of dispatch records, and outages. It is
// not on the routing hot path: Store.Dispatched only appends to a bounded
// in-memory buffer, and all Redis I/O happens in Store.Run's background
// loops (and in TryLease, which the rebalancer calls), so a slow or dead
// Redis delays agreement, never a request. It is not a durable store
// either: everything in it is a hint that the replicas rebuild from
// traffic.
//
// Two implementations: NewMemory for a single replica (a pool of one), and
// NewRedis, which works with a single Redis server, a Cluster or a
// Sentinel-managed primary (redis.UniversalClient).
//
// # Protocol
//
// Every key of a pool shares the hash tag {prefix:pool} (prefix defaults to
// "dualmap"), so a pool lives in one Cluster slot and pipelines and Lua
// scripts work there. With T the tag and H the heartbeat period:
//
//	T:kv             stream   dispatch batches, one entry per flush per replica
//	T:state:<replica> string  that replica's state (ReplicaState message); PX 3H
//	T:load:<replica> hash     the same load in the legacy format, one field per instance; PEXPIRE 3H
//	T:replicas       zset     replica ids scored by last heartbeat (Redis clock, ms)
//	T:kd:leader      string   key-depth leader lease: the leader's id; PX 3H
//	T:kd             string   the leader's key-depth table (KeyDepth message)
//	T:mig:<instance> string   migration lease on a source instance: holder id; PX ttl
//	T:kvev           stream   relayed KV events (bind mode; kvrelay.go), one entry per flush per relaying replica
//
// Dispatch records. Dispatched appends (instance, chained blocks) to a
// buffer; an identical record still waiting is coalesced. Every Flush
// period the publisher XADDs the buffer as one stream entry with fields
// r (replica id) and d (a DispatchBatch message of proto/state.proto, whose
// unix_nanos is when the oldest record in it was recorded), trimming the
// stream to about StreamMaxLen entries (MAXLEN ~). Large backlogs are cut
// into several entries. Readers XREAD BLOCK 100ms from their last id, skip
// their own entries and hand the rest to the Coordinator, which applies
// them with RecordCached. On start, and after every outage, a reader reads
// the stream from the beginning: the stream is the snapshot a new replica
// warms up from. Propagation delay is
// the reader's wall clock minus unix_nanos, so it includes the flush wait
// and any clock skew between hosts. Size StreamMaxLen with care: an entry
// is a whole batch, so Redis holds about StreamMaxLen times the average
// batch (one flush of one replica: 100 dispatches of 16 blocks make 13 KB,
// so 200000 such entries take 2.6 GB), and a starting replica replays all
// of it. About as much history as an instance's KV cache holds is enough.
//
// Load. Every heartbeat (coord.Options.Heartbeat, H) the Coordinator's Sync
// makes two pipelined round trips. Beat: a Lua script that replaces the
// replica's state T:state:<replica> (LocalLoad as a ReplicaState message of
// proto/state.proto: one InstanceLoad per instance) and its legacy load
// hash (the same load, each value four uvarints: queued, queued tokens,
// pending tokens, running; plus a presence field "@"), sets both to
// expire in 3H, ZADDs the replica to T:replicas with Redis's own clock,
// drops members older than 3H (and scored more than 3H ahead) and returns
// the rest; the key-depth lease script; and a GET of T:kd that returns
// only its length when it is above MaxKeyDepthBytes. Collect: GETRANGE
// (bounded by MaxStateBytes) and PTTL of the other replicas' T:state (and
// the leader's key-depth update, if any); for a replica without T:state, a
// third round trip reads its legacy hash (HGETALL and PTTL). The
// Coordinator sums the others' loads per instance into SetRemoteLoad;
// instances nobody reports get a zero Load. A replica whose heartbeats
// stop (crash, SIGKILL, partition) vanishes within 3H: its keys expire and
// it is dropped from the zset. A replica that stops cleanly (Run's ctx
// ends) deletes its keys and leaves at once. All replicas of a pool should
// use the same heartbeat.
//
// Versions. The load hash with positional values is the format of the
// releases before ReplicaState; replicas of those read only it. This
// release writes both and reads T:state when a replica wrote one, the hash
// otherwise, so old and new replicas run side by side during a rolling
// upgrade, each seeing all the others' load (TestMixedVersions runs one
// of each, the old one with a copy of the old code). The next release
// stops writing the hash (it keeps reading it, for replicas of this one);
// the one after stops reading it: upgrade one release at a time.
// ReplicaState evolves by adding fields, which older readers ignore; an
// incompatible change takes a new key, written beside this one for a
// release, the same way.
//
// Key depth. One replica holds the leader lease T:kd:leader (acquired as
// SET NX PX 3H, renewed by its holder each heartbeat; both in one Lua
// script so that only the holder renews). The leader publishes its own
// KeyDepthState to T:kd with an increasing version whenever it differs from
// what is there; followers import it each heartbeat when the version
// changed or their own table drifted from it. When the leader dies its
// lease expires and the next replica to heartbeat takes it over, first
// adopting the published table (it may have just started, with an empty
// one) and then publishing its own as it evolves. A leader that cannot
// reach Redis stops considering itself leader. (The decisions are the
// Coordinator's; the keys and encodings are this package's.)
//
// Migration leases. TryLease runs the same acquire-or-renew script on
// T:mig:<instance>: true for the replica that holds the lease (a holder
// asking again extends it), false for any other until it expires. The
// Coordinator's Rebalance takes one per source instance it plans moves
// from.
//
// # Failures
//
// When Redis is unreachable or restarts, Run keeps going: each loop retries
// with exponential backoff capped at 1s. The store logs one Warn when an
// outage starts and one Info when it ends, and Stats reports Up, Outages
// and DownSince. Dispatched keeps buffering; past the bound (Buffer) the
// oldest records are dropped and counted. The Coordinator clears remote
// loads (sets them to zero) after 3 heartbeats without fresh data, so a
// cut-off replica routes on its own view rather than stale numbers. After the outage the buffered
// records are published, the load hash and the key-depth table are written
// again, and readers re-read the stream from the beginning, so agreement
// recovers within a few heartbeats. A Redis that restarted empty loses the
// stream: replicas keep their own KV indexes, but a replica started after
// that begins cold. Records for instances this replica does not know
// (pools changing) are skipped and counted (coord.Stats.Unknown). Redis
// errors other than connection failures (OOM, a wrong type or an ACL
// refusal now and then) are counted and logged at Debug but do not mark
// Redis down; refusals that persist do (see Limits). So do three
// connection failures in a row of one loop while the others succeed (a
// reply the guard refuses every time); that outage ends when that loop
// succeeds again.
//
// # Limits
//
// Everything Redis returns is untrusted: anyone who can write to the
// server (or a corrupted one) must not be able to take the replicas down.
// go-redis v9 allocates whatever length a reply header announces and has
// no option to bound it, so the client's Dialer puts a guard under it that
// parses the RESP stream as it is read: a bulk string above MaxReplyBytes
// (16 MiB), bulk strings adding up to more than MaxReplyTotal (128 MiB) in
// one reply, an aggregate announcing more than MaxReplyElements (1<<20)
// values outstanding, or bytes that are not RESP close the connection
// before go-redis sees that read. It counts in Stats.RefusedReplies, logs a
// Warn, and is an outage like any connection failure. Every background
// round (heartbeat, read, publish, and the clean-up when Run ends) recovers
// from a panic: it is logged at Error with its stack, counted in
// Stats.Panics, and the loop goes on with its backoff.
//
// What the replies hold is validated before the Coordinator sees it, and
// what is skipped or cut is counted (Stats.Malformed, Oversized, Clamped,
// Ignored, BadClock):
//
//   - T:kd above MaxKeyDepthBytes (default 16 bytes per split plus 4 KiB)
//     is not read; a table that decodes has its splits sorted,
//     deduplicated and cut to MaxSplits (default 4096, the scheduler's
//     default: set both alike), and a version in [0, 2^62].
//   - Each field of a load value is clamped: queued and running requests
//     to MaxLoadRequests (default 65536), queued and pending tokens to
//     MaxLoadTokens (default 2^24); a legacy value that does not decode is
//     skipped. A T:state above MaxStateBytes (default 1 MiB) is not read
//     (only that many bytes and one more come back); one that does not
//     decode, has an entry without an instance or the same instance twice
//     is skipped whole. The bounds are per replica and instance, in this package:
//     it does not know each instance's KV capacity, so they are set above
//     what one instance holds, to bound the damage rather than judge it.
//   - A state or load hash without an expiry is not read (every replica sets one),
//     and a member of T:replicas scored more than 3H ahead of Redis's clock
//     is dropped (it would never expire). At most MaxReplicas (default
//     1024) members are read each heartbeat, the most recent first.
//   - A dispatch batch stamped more than a second ahead of this replica's
//     clock counts as recorded now, one stamped before 1970 as recorded at
//     the epoch, so the propagation figures stay within what was measured.
//   - WRONGTYPE, NOPERM, NOAUTH or WRONGPASS answered three times in a row
//     to one operation is an outage (Stats.Up false) until that operation
//     succeeds: a tampered or misconfigured Redis that will not fix itself.
//
// This bounds what a writer to Redis can do to the replicas' memory, CPU
// and routing; without RecordKeys it does not authenticate replicas: one
// that writes the protocol faithfully (a load hash with an expiry,
// heartbeats on time) is believed within the bounds (and package coord
// cuts its load to the others' share of each instance). With RecordKeys
// the replicas' states are signed and checked (sign.go; Stats.Unsigned
// counts those refused); the key-depth table, dispatch records, leases and
// presence are not. Protect Redis with ACLs and TLS.
//
// go-redis logs every failed dial through its own process-wide logger; see
// RedisLogger to route those lines to slog at Debug.
//
// Requirements on Redis: version 5 or later (streams), EVAL allowed for
// the user, and clocks of the replica hosts within a few milliseconds of
// each other for the propagation figures to mean anything (liveness uses
// Redis's clock and key expiry, not the replicas').
package state
