package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// KV-event relay (bind mode with several router replicas). Where engines
// dial one address, only the replica behind it hears their KV events; the
// relay carries what that replica applied to its exact view (blocks stored,
// removed, cleared, and whether the view is exact) to the other replicas
// through the stream T:kvev, and applies what the others carry to this
// replica's view of the instances it does not hear itself.
//
//	T:kvev  stream  relayed KV-event batches: r (replica id), d (kvBatch, sealed with RecordKeys)
//
// The encoding is this package's own (kvcodec.go). Entries are trimmed to
// about KVRelayOptions.StreamMaxLen (MAXLEN ~); each holds at most
// MaxEntryBytes. A relaying replica keeps a copy of what it relayed per
// instance (its mirror), and writes it whole (a snapshot) every
// SnapshotEvery and after it had to drop operations, so that a replica
// reading a trimmed stream from its beginning (a restart, an outage) is
// whole again after the next snapshot at the latest.

// KVTarget is what relayed KV events are applied to: the same methods as
// internal/kvevents.Target (the pool implements both). Its methods must
// not block on I/O.
type KVTarget interface {
	Stored(id string, keys []uint64)
	Removed(id string, keys []uint64)
	Cleared(id string)
	SetExact(id string, exact bool)
}

// KVRelayOptions configures a KVRelay. Zero values mean the defaults
// noted.
type KVRelayOptions struct {
	// Known reports whether an instance is in the pool: relayed
	// operations on others are skipped and counted (Stats.Ignored), and
	// this replica's mirror forgets them at the next snapshot. Required;
	// called from Run's two goroutines at once.
	Known func(id string) bool
	// StreamMaxLen caps T:kvev, in entries (default 10000, approximate
	// trimming). Redis holds at most StreamMaxLen times MaxEntryBytes
	// (640 MiB by default; an entry is one Flush of one replica, 9 bytes
	// a block, so 100k block events/s make 9 KB entries and 90 MB). Keep
	// StreamMaxLen flushes longer than SnapshotEvery, so that the stream
	// holds a snapshot of every instance.
	StreamMaxLen int64
	// MaxEntryBytes bounds one encoded entry, written or read (default
	// 64 KiB, about 7000 block keys); a larger entry read is skipped
	// (Stats.Oversized).
	MaxEntryBytes int
	// Buffer bounds the operations waiting to be written, in block keys,
	// each operation counting one more (default 1<<20, 8 MiB). Past it
	// the oldest are dropped (Stats.Dropped) and the instances they
	// touched are snapshotted instead.
	Buffer int
	// SnapshotEvery is how often the mirror of every instance this
	// replica hears is written whole (default 1m; negative: only after
	// drops).
	SnapshotEvery time.Duration
	// Handover is how long after this replica last heard an instance
	// another replica's operations on it are applied here (default 5s):
	// the engine's connection moved (a replica restarted, a load
	// balancer re-routed it), and this replica's view of it is stale.
	// Until then they are skipped: this replica's own subscriber is its
	// source.
	Handover time.Duration
}

// Relay defaults.
const (
	DefaultKVStreamMaxLen  = 10_000
	DefaultKVMaxEntryBytes = 64 << 10
	DefaultKVBuffer        = 1 << 20
	DefaultKVSnapshotEvery = time.Minute
	DefaultKVHandover      = 5 * time.Second
	// MaxKVInstanceBytes bounds an instance id in a relayed entry.
	MaxKVInstanceBytes = 512
)

// ErrInvalidRelay is returned by NewKVRelay for unusable options.
var ErrInvalidRelay = errors.New("state: invalid kv relay options")

// KVRelay relays one pool's KV events between replicas. Use it as the
// local subscriber's target (it applies to local and queues what it
// applied), and Run it beside the store. Safe for concurrent use.
type KVRelay struct {
	s     *RedisStore
	local KVTarget
	opt   KVRelayOptions
	key   string // T:kvev

	mu      sync.Mutex
	ops     []kvOp // waiting to be written
	cost    int
	mirror  map[string]*kvMirror // instances this replica hears
	resnap  map[string]bool      // instances to snapshot at the next flush
	lastSnp time.Time

	rd kvReader // owned by the read loop

	published, applied, dropped, snapshots, handovers atomic.Uint64
	delay                                             atomic.Int64
	running                                           atomic.Bool
}

// kvMirror is what this replica relayed of one instance.
type kvMirror struct {
	exact bool
	keys  map[uint64]struct{}
	last  time.Time // when this replica's subscriber last reported it
}

type kvReader struct {
	last  string
	epoch uint64
	ops   []kvOp
}

// KVRelayStats counts what a relay did.
type KVRelayStats struct {
	// Published counts operations written; Applied, operations of other
	// replicas applied here; Dropped, operations lost because the buffer
	// was full (their instances were snapshotted); Snapshots, instance
	// snapshots written; Handovers, instances another replica took
	// over.
	Published, Applied, Dropped, Snapshots, Handovers uint64
	// DelayLast is the delay of the last entry read from another
	// replica: from its write (that replica's clock) to when it was
	// applied here. It includes the Flush wait only in part: an entry is
	// stamped when it is written.
	DelayLast time.Duration
}

// NewKVRelay returns a relay over s applying other replicas' events to
// local. What it rejects counts in s.Stats() (Malformed, Oversized,
// Ignored, Unsigned), as any Redis input.
func NewKVRelay(s *RedisStore, local KVTarget, opt KVRelayOptions) (*KVRelay, error) {
	if opt.StreamMaxLen == 0 {
		opt.StreamMaxLen = DefaultKVStreamMaxLen
	}
	if opt.MaxEntryBytes == 0 {
		opt.MaxEntryBytes = DefaultKVMaxEntryBytes
	}
	if opt.Buffer == 0 {
		opt.Buffer = DefaultKVBuffer
	}
	if opt.SnapshotEvery == 0 {
		opt.SnapshotEvery = DefaultKVSnapshotEvery
	}
	if opt.Handover == 0 {
		opt.Handover = DefaultKVHandover
	}
	switch {
	case s == nil || local == nil || opt.Known == nil:
		return nil, fmt.Errorf("%w: a store, a target and Known are required", ErrInvalidRelay)
	case opt.StreamMaxLen < 1 || opt.Buffer < 1:
		return nil, fmt.Errorf("%w: StreamMaxLen and Buffer must be >= 1, got %d and %d", ErrInvalidRelay, opt.StreamMaxLen, opt.Buffer)
	case opt.MaxEntryBytes < 1024 || int64(opt.MaxEntryBytes) >= s.opt.MaxReplyBytes:
		return nil, fmt.Errorf("%w: MaxEntryBytes must be in [1024, MaxReplyBytes), got %d", ErrInvalidRelay, opt.MaxEntryBytes)
	}
	return &KVRelay{
		s: s, local: local, opt: opt, key: s.keys.tag + ":kvev",
		mirror: map[string]*kvMirror{}, resnap: map[string]bool{},
	}, nil
}

// Stats returns the relay's counters.
func (r *KVRelay) Stats() KVRelayStats {
	return KVRelayStats{
		Published: r.published.Load(), Applied: r.applied.Load(), Dropped: r.dropped.Load(),
		Snapshots: r.snapshots.Load(), Handovers: r.handovers.Load(), DelayLast: time.Duration(r.delay.Load()),
	}
}

// Stored implements KVTarget: applied here, then relayed.
func (r *KVRelay) Stored(id string, keys []uint64) {
	r.local.Stored(id, keys)
	r.mu.Lock()
	m := r.heard(id)
	for _, k := range keys {
		m.keys[k] = struct{}{}
	}
	r.queue(kvOp{kind: kvStored, id: id, at: m.last.UnixNano(), keys: append([]uint64(nil), keys...)})
	r.mu.Unlock()
}

// Removed implements KVTarget.
func (r *KVRelay) Removed(id string, keys []uint64) {
	r.local.Removed(id, keys)
	r.mu.Lock()
	m := r.heard(id)
	for _, k := range keys {
		delete(m.keys, k)
	}
	r.queue(kvOp{kind: kvRemoved, id: id, at: m.last.UnixNano(), keys: append([]uint64(nil), keys...)})
	r.mu.Unlock()
}

// Cleared implements KVTarget.
func (r *KVRelay) Cleared(id string) {
	r.local.Cleared(id)
	r.mu.Lock()
	m := r.heard(id)
	clear(m.keys)
	r.queue(kvOp{kind: kvCleared, id: id, at: m.last.UnixNano()})
	r.mu.Unlock()
}

// SetExact implements KVTarget.
func (r *KVRelay) SetExact(id string, exact bool) {
	r.local.SetExact(id, exact)
	r.mu.Lock()
	m := r.heard(id)
	m.exact = exact
	k := kvInexact
	if exact {
		k = kvExact
	}
	r.queue(kvOp{kind: k, id: id, at: m.last.UnixNano()})
	r.mu.Unlock()
}

// Forget drops instance id from the mirror (it left the pool).
func (r *KVRelay) Forget(id string) {
	r.mu.Lock()
	delete(r.mirror, id)
	delete(r.resnap, id)
	r.mu.Unlock()
}

// heard returns id's mirror, creating it. r.mu held.
func (r *KVRelay) heard(id string) *kvMirror {
	m := r.mirror[id]
	if m == nil {
		m = &kvMirror{keys: map[uint64]struct{}{}}
		r.mirror[id] = m
	}
	m.last = time.Now()
	return m
}

// queue appends op, dropping the oldest operations beyond the bound; the
// instances they touched are snapshotted at the next flush. r.mu held.
func (r *KVRelay) queue(op kvOp) {
	r.ops = append(r.ops, op)
	r.cost += op.cost()
	i := 0
	for r.cost > r.opt.Buffer && i < len(r.ops) {
		r.cost -= r.ops[i].cost()
		r.resnap[r.ops[i].id] = true
		i++
	}
	if i > 0 {
		r.dropped.Add(uint64(i))
		n := copy(r.ops, r.ops[i:])
		clear(r.ops[n:])
		r.ops = r.ops[:n]
	}
}

// take returns the waiting operations, with snapshots of the instances
// due one appended. A snapshot comes after the operations it replaces,
// so applying everything in order ends in the mirror's state.
func (r *KVRelay) take(now time.Time) []kvOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opt.SnapshotEvery > 0 && now.Sub(r.lastSnp) >= r.opt.SnapshotEvery {
		r.lastSnp = now
		for id := range r.mirror {
			r.resnap[id] = true
		}
	}
	ops := r.ops
	r.ops, r.cost = nil, 0
	for id := range r.resnap {
		m := r.mirror[id]
		delete(r.resnap, id)
		if m == nil {
			continue
		}
		if !r.opt.Known(id) { // it left the pool: forget it rather than snapshot it forever
			delete(r.mirror, id)
			continue
		}
		r.snapshots.Add(1)
		ops = append(ops, snapshotOps(id, m)...)
	}
	return ops
}

// snapshotOps writes m whole: an exact view replaces the readers' index
// (exact, cleared, stored); a predicted one only adds what the events
// said.
func snapshotOps(id string, m *kvMirror) []kvOp {
	keys := make([]uint64, 0, len(m.keys))
	for k := range m.keys {
		keys = append(keys, k)
	}
	at := m.last.UnixNano() // when this replica last heard it, not now: see mine
	if !m.exact {
		return []kvOp{{kind: kvInexact, id: id, at: at}, {kind: kvStored, id: id, at: at, keys: keys}}
	}
	return []kvOp{{kind: kvExact, id: id, at: at}, {kind: kvCleared, id: id, at: at}, {kind: kvStored, id: id, at: at, keys: keys}}
}

// Run writes what this replica applied every Flush period and reads the
// others' entries until ctx ends. Redis failures never make it return;
// they count in the store's outages like its own loops'.
func (r *KVRelay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return fmt.Errorf("state: kv relay %s: %w", r.s.opt.Replica, ErrRunning)
	}
	defer r.running.Store(false)
	var wg sync.WaitGroup
	wg.Go(func() { r.publishLoop(ctx) })
	wg.Go(func() { r.readLoop(ctx) })
	wg.Wait()
	return nil
}

func (r *KVRelay) publishLoop(ctx context.Context) {
	t := time.NewTicker(r.s.opt.Flush)
	defer t.Stop()
	var bo backoff
	var pending []kvOp // written on the next success
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		var sent bool
		err := r.s.safely("kv relay publish", func() error {
			pending = append(pending, r.take(began)...)
			n, err := r.flush(ctx, pending)
			if err == nil {
				r.published.Add(uint64(n))
				sent = n > 0
				clear(pending)
				pending = pending[:0]
			}
			return err
		})
		if err == nil {
			if sent {
				r.s.health.ok("kv relay publish")
			}
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r.s.health.failed("kv relay publish", began, err)
		r.mu.Lock() // what failed is replaced by snapshots of what it touched
		for _, op := range pending {
			r.resnap[op.id] = true
		}
		r.mu.Unlock()
		r.dropped.Add(uint64(len(pending)))
		clear(pending)
		pending = pending[:0]
		if !sleep(ctx, bo.fail()) {
			return
		}
	}
}

// flush XADDs ops, cut into entries of at most MaxEntryBytes, in one
// pipeline; it returns how many operations it wrote.
func (r *KVRelay) flush(ctx context.Context, ops []kvOp) (int, error) {
	if len(ops) == 0 {
		return 0, nil
	}
	entries := encodeKV(ops, r.opt.MaxEntryBytes-kvSealOverhead, time.Now())
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range entries {
			if len(r.s.opt.RecordKeys) > 0 {
				e = sealKV(r.s.opt.RecordKeys[0], r.s.opt.Pool, r.s.opt.Replica, e)
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: r.key, MaxLen: r.opt.StreamMaxLen, Approx: true, Values: []any{"r", r.s.opt.Replica, "d", e}})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ops), nil
}

func (r *KVRelay) readLoop(ctx context.Context) {
	var bo backoff
	for ctx.Err() == nil {
		began := time.Now()
		err := r.s.safely("kv relay read", func() error { return r.receive(ctx) })
		if err == nil {
			r.s.health.ok("kv relay read")
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r.s.health.failed("kv relay read", began, err)
		if !sleep(ctx, bo.fail()) {
			return
		}
	}
}

// receive is one XREAD BLOCK from the last entry read; it starts from the
// stream's beginning, and again after every outage, as the dispatch
// reader does: the stream (with its snapshots) is what a starting replica
// rebuilds from.
func (r *KVRelay) receive(ctx context.Context) error {
	rd := &r.rd
	if e := r.s.health.currentEpoch(); e != rd.epoch || rd.last == "" {
		rd.epoch, rd.last = e, "0"
	}
	rctx, cancel := context.WithTimeout(ctx, readBlock+opTimeout)
	defer cancel()
	res, err := r.s.rdb.XRead(rctx, &redis.XReadArgs{Streams: []string{r.key, rd.last}, Count: readCount, Block: readBlock}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case err != nil:
		return err
	}
	for _, st := range res {
		for _, m := range st.Messages {
			rd.last = m.ID
			r.entry(m.Values)
		}
	}
	return nil
}

// entry validates one stream entry whole, then applies it, unless this
// replica wrote it. Operations on instances this replica hears itself
// are skipped: its own subscriber is their source here.
func (r *KVRelay) entry(v map[string]any) {
	replica, _ := v["r"].(string)
	if replica == r.s.opt.Replica {
		return
	}
	st := &r.s.st
	d, ok := v["d"].(string)
	if !ok || replica == "" {
		st.errors.Add(1)
		st.malformed.Add(1)
		return
	}
	if len(d) > r.opt.MaxEntryBytes {
		st.oversized.Add(1)
		return
	}
	body, err := unsealKV(r.s.opt.RecordKeys, r.s.opt.Pool, replica, d)
	if err != nil {
		st.unsigned.Add(1)
		return
	}
	ops, at, err := decodeKV(body, r.rd.ops[:0])
	r.rd.ops = ops[:0]
	if err != nil {
		st.errors.Add(1)
		st.malformed.Add(1)
		r.s.health.log.Debug("state: skipping malformed kv relay entry", "err", err)
		return
	}
	now := time.Now()
	for i := range ops {
		op := &ops[i]
		if !r.opt.Known(op.id) {
			st.ignored.Add(1)
			continue
		}
		if r.mine(op.id, time.Unix(0, op.at), now) {
			continue
		}
		switch op.kind {
		case kvStored:
			r.local.Stored(op.id, op.keys)
		case kvRemoved:
			r.local.Removed(op.id, op.keys)
		case kvCleared:
			r.local.Cleared(op.id)
		case kvExact:
			r.local.SetExact(op.id, true)
		case kvInexact:
			r.local.SetExact(op.id, false)
		}
		r.applied.Add(1)
	}
	r.delay.Store(int64(max(now.Sub(batchTime(at, now, st)), 0))) // absurd stamps count in BadClock
	clear(ops)
}

// mine reports whether this replica hears instance id itself, given an
// operation another replica heard at heard. One this replica has not
// heard for Handover, and that the other heard later than it did, is
// handed over to the other (the engine's connection moved there); an
// older one (the other's snapshot of what it heard before) is not, so two
// replicas never hand an instance back and forth.
func (r *KVRelay) mine(id string, heard, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mirror[id]
	switch {
	case m == nil:
		return false
	case now.Sub(m.last) < r.opt.Handover, !heard.After(m.last):
		return true
	}
	delete(r.mirror, id)
	delete(r.resnap, id)
	r.handovers.Add(1)
	return false
}
