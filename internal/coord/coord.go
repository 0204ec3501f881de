package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Scheduler is what a Coordinator feeds and rebalances: the local
// scheduler. Its methods are called from the goroutines that run the
// Coordinator's rounds, so they must be safe for concurrent use and must
// not block for long.
type Scheduler interface {
	// LocalLoad fills dst with this replica's own load per instance.
	LocalLoad(dst map[string]scheduler.Load)
	// SetRemoteLoad sets the other replicas' combined load on instance id.
	SetRemoteLoad(id string, l scheduler.Load) error
	// RecordCached records another replica's dispatch of blocks to
	// instance id at time at.
	RecordCached(id string, blocks []uint64, at time.Time) error
	KeyDepthState() scheduler.KeyDepthState
	ImportKeyDepth(st scheduler.KeyDepthState)
	// Plan returns the moves one rebalancing round would make; Apply makes
	// those still valid and returns how many it made.
	Plan() []scheduler.Move
	Apply(moves []scheduler.Move) int
	// RemoteBounds fills dst with the most load the other replicas
	// together can hold on each instance; SetReplicas tells it how many
	// replicas share the pool, this one included (see
	// scheduler.Scheduler.RemoteBounds).
	RemoteBounds(dst map[string]scheduler.Load)
	SetReplicas(n int)
}

// Options configures a Coordinator. Zero values mean the defaults written
// next to each field.
type Options struct {
	// Heartbeat is the period at which the caller runs Sync (default
	// 100ms). Presence and the key-depth leader lease last 3 heartbeats;
	// the other replicas' loads are cleared when they are that old. Use the
	// same value on every replica of a pool.
	Heartbeat time.Duration
	// LeaseTTL is how long a migration lease lasts (default 200ms, two
	// scheduler ticks of the default 100ms).
	LeaseTTL time.Duration
	// LeaseTimeout bounds one TryLease; a lease not answered in time is
	// not held (default 50ms; negative: no bound, for a transport that
	// answers at once like the Hub).
	LeaseTimeout time.Duration
	// Now is the clock for data age (default time.Now). The simulator
	// passes its simulated clock.
	Now func() time.Time
	// Logger gets the warnings (clamped loads; default: discard).
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultHeartbeat    = 100 * time.Millisecond
	DefaultLeaseTTL     = 200 * time.Millisecond
	DefaultLeaseTimeout = 50 * time.Millisecond
)

// ErrInvalidOptions is returned by New for unusable options or arguments.
var ErrInvalidOptions = errors.New("coord: invalid options")

func (o Options) withDefaults() Options {
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTimeout == 0 {
		o.LeaseTimeout = DefaultLeaseTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Heartbeat < time.Millisecond:
		return fmt.Errorf("%w: Heartbeat must be >= 1ms, got %v", ErrInvalidOptions, o.Heartbeat)
	case o.LeaseTTL < time.Millisecond:
		return fmt.Errorf("%w: LeaseTTL must be >= 1ms, got %v", ErrInvalidOptions, o.LeaseTTL)
	}
	return nil
}

// Coordinator runs one replica's side of the coordination (see the package
// doc) over a Transport. Create it with New. Sync, Expire and Leave must
// not run concurrently with each other (one goroutine drives them);
// Receive and Rebalance may each run from another goroutine, concurrently
// with the rest. Stats may be called at any time.
type Coordinator struct {
	t   Transport
	s   Scheduler
	opt Options
	me  string

	mu sync.Mutex // guards the heartbeat state below (Sync, Expire, Leave)
	// local, remote and bounds are scratch maps reused every heartbeat.
	local, remote, bounds map[string]scheduler.Load
	others                []string
	lastData              time.Time // when the others' loads were last read
	cleared               bool      // remote loads were zeroed for lack of data
	kdVersion             int64     // key-depth version last published or imported
	wasLeader             bool      // held the key-depth lease at the last Sync

	st      counters
	clamped clamps
}

// counters are Stats' counters, updated without locks.
type counters struct {
	replicas                      atomic.Int64
	leader                        atomic.Bool
	keyDepthVersion               atomic.Int64
	applied, unknown              atomic.Uint64
	granted, refused, leaseErrors atomic.Uint64
	moved                         atomic.Uint64
}

// Stats is a snapshot of a Coordinator's state and cumulative counters.
type Stats struct {
	// Replicas is the number of other live replicas seen at the last Sync
	// (0 once their data went stale).
	Replicas int
	// Leader is true while this replica holds the key-depth leader lease.
	Leader bool
	// KeyDepthVersion is the version of the key-depth table last published
	// or imported.
	KeyDepthVersion int64
	// Applied counts other replicas' dispatch records applied with
	// RecordCached; Unknown those for instances the scheduler does not
	// have.
	Applied, Unknown uint64
	// Granted and Refused count migration leases asked for (one per
	// source instance per rebalancing round); LeaseErrors those that
	// failed (counted as refused too).
	Granted, Refused, LeaseErrors uint64
	// Moved counts the moves Apply made.
	Moved uint64
	// ClampedBy counts, per replica, the load records cut to what the
	// instances can hold (Scheduler.RemoteBounds) before they counted: at
	// most 32 replicas by name, the later ones under "other".
	// ClampedSums counts the heartbeats whose sum over the other replicas
	// was cut.
	ClampedBy   map[string]uint64
	ClampedSums uint64
}

// New returns the Coordinator of the replica t speaks for, feeding s.
func New(t Transport, s Scheduler, o Options) (*Coordinator, error) {
	if t == nil || s == nil {
		return nil, fmt.Errorf("%w: nil transport or scheduler", ErrInvalidOptions)
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Coordinator{
		t: t, s: s, opt: o, me: t.Replica(),
		local:    make(map[string]scheduler.Load),
		remote:   make(map[string]scheduler.Load),
		bounds:   make(map[string]scheduler.Load),
		lastData: o.Now(),
	}, nil
}

// Replica returns this replica's id.
func (c *Coordinator) Replica() string { return c.me }

// Heartbeat returns the period at which the caller should run Sync.
func (c *Coordinator) Heartbeat() time.Duration { return c.opt.Heartbeat }

// Sync is one heartbeat round: this replica's presence and load out, the
// others' loads in, and the key-depth table published (leader) or imported
// (the others). On a transport error this replica stops considering itself
// leader and the others' loads are cleared if they are 3 heartbeats old.
func (c *Coordinator) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.sync(ctx)
	if err != nil {
		c.st.leader.Store(false) // cannot renew: assume the lease lost
		c.wasLeader = false
		c.expire()
		return fmt.Errorf("coord: sync %s: %w", c.me, err)
	}
	return nil
}

func (c *Coordinator) sync(ctx context.Context) error {
	clear(c.local)
	c.s.LocalLoad(c.local)
	seen, err := c.t.Beat(ctx, Beat{Load: c.local, TTL: c.ttl(), Period: c.opt.Heartbeat})
	if err != nil {
		return err
	}
	leader, published := seen.Leader, seen.Table
	c.st.leader.Store(leader)

	// A new leader starts from the pool's table, not its own (it may have
	// just started); from then on its own table is the pool's.
	if leader && !c.wasLeader && published != nil && published.Leader != c.me {
		c.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: published.Splits})
		c.setVersion(published.Version)
	}
	c.wasLeader = leader
	cur := c.s.KeyDepthState()
	var update *Table
	if leader && (published == nil || published.Leader != c.me || !slices.Equal(published.Splits, cur.Splits)) {
		v := c.kdVersion
		if published != nil {
			v = max(v, published.Version)
		}
		update = &Table{Splits: cur.Splits, Version: v + 1, Leader: c.me}
	}

	c.others = c.others[:0]
	for _, r := range seen.Members {
		if r != c.me {
			c.others = append(c.others, r)
		}
	}
	peers, err := c.t.Collect(ctx, c.others, update)
	if err != nil {
		return err
	}
	c.applyLoads(peers)
	switch {
	case update != nil:
		c.setVersion(update.Version)
	case !leader && published != nil && (published.Version != c.kdVersion || !slices.Equal(published.Splits, cur.Splits)):
		c.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: published.Splits})
		c.setVersion(published.Version)
	}
	return nil
}

// ttl is the life of presence, load and the leader lease: 3 heartbeats.
func (c *Coordinator) ttl() time.Duration { return 3 * c.opt.Heartbeat }

func (c *Coordinator) setVersion(v int64) {
	c.kdVersion = v
	c.st.keyDepthVersion.Store(v)
}

// applyLoads sums the peers' loads per instance, each peer's and then the
// sum cut to the instances' bounds (clamp.go), and sets every local
// instance's remote load (zero where nobody reports).
func (c *Coordinator) applyLoads(peers []Peer) {
	clear(c.remote)
	clear(c.bounds)
	c.s.RemoteBounds(c.bounds)
	c.s.SetReplicas(len(peers) + 1)
	now := c.opt.Now()
	for _, p := range peers {
		cut := false
		for id, l := range p.Load {
			l, was := c.clampOf(id, l)
			cut = cut || was
			sum := c.remote[id]
			sum.Queued += l.Queued
			sum.QueuedTokens += l.QueuedTokens
			sum.PendingTokens += l.PendingTokens
			sum.Running += l.Running
			c.remote[id] = sum
		}
		if cut {
			c.clamped.count(p.Replica, now, c.opt.Logger)
		}
	}
	cut := false
	for id := range c.local {
		l, was := c.clampOf(id, c.remote[id])
		cut = cut || was
		_ = c.s.SetRemoteLoad(id, l) // ids come from the scheduler, sums are >= 0
	}
	if cut {
		c.clamped.count("", now, c.opt.Logger)
	}
	c.st.replicas.Store(int64(len(peers)))
	c.lastData = c.opt.Now()
	c.cleared = false
}

// Expire clears the other replicas' loads (sets them to zero) when the last
// successful Sync is 3 heartbeats old, so that a replica cut off from the
// others routes on its own view rather than on stale numbers. Sync does it
// itself when it fails; call Expire every heartbeat when skipping Sync (a
// transport backing off).
func (c *Coordinator) Expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
}

func (c *Coordinator) expire() {
	if c.cleared || c.opt.Now().Sub(c.lastData) <= c.ttl() {
		return
	}
	c.st.replicas.Store(0)
	c.s.SetReplicas(1)
	for id := range c.local {
		_ = c.s.SetRemoteLoad(id, scheduler.Load{}) // a zero load is always valid for a known id
	}
	c.cleared = true
}

// Dispatched records this replica's dispatch of a prompt's blocks to
// instance for the other replicas (through the transport). Call it for
// every request the local scheduler dispatched with blocks; it does not
// block and copies nothing it keeps but through the transport.
func (c *Coordinator) Dispatched(instance string, blocks []uint64) {
	if instance == "" || len(blocks) == 0 {
		return
	}
	c.t.Dispatched(instance, blocks)
}

// Served records that instance served a request of blocks that was
// dispatched elsewhere (the proxy's fallback): its KV cache holds the
// prompt now, for the local scheduler (RecordCached, now) and, through the
// transport, the other replicas. It returns the scheduler's error (an
// instance it does not know), recording nothing then.
func (c *Coordinator) Served(instance string, blocks []uint64) error {
	if len(blocks) == 0 {
		return nil
	}
	if err := c.s.RecordCached(instance, blocks, c.opt.Now()); err != nil {
		return err
	}
	c.t.Dispatched(instance, blocks)
	return nil
}

// Receive applies the dispatch records the other replicas published since
// the last call (the transport may wait a short while for them).
func (c *Coordinator) Receive(ctx context.Context) error {
	batches, err := c.t.Receive(ctx)
	if err != nil {
		return fmt.Errorf("coord: receive %s: %w", c.me, err)
	}
	for _, b := range batches {
		c.merge(b)
	}
	return nil
}

// merge applies one batch of another replica's dispatch records with
// RecordCached, aged from b.At; this replica's own batches are skipped.
func (c *Coordinator) merge(b Batch) {
	if b.Replica == c.me {
		return
	}
	for _, r := range b.Records {
		if err := c.s.RecordCached(r.Instance, r.Blocks, b.At); err != nil {
			c.st.unknown.Add(1)
			continue
		}
		c.st.applied.Add(1)
	}
}

// Rebalance is one coordinated rebalancing round: the moves are planned
// locally and applied only from the source instances whose lease this
// replica holds (taken, or renewed, for LeaseTTL). It returns the number of
// moves applied. A lease the transport fails to answer is not held.
func (c *Coordinator) Rebalance(ctx context.Context) int {
	moves := c.s.Plan()
	if len(moves) == 0 {
		return 0
	}
	held := make(map[string]bool, 4)
	kept := moves[:0]
	for _, m := range moves {
		ok, asked := held[m.From]
		if !asked {
			ok = c.lease(ctx, m.From)
			held[m.From] = ok
		}
		if ok {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		return 0
	}
	n := c.s.Apply(kept)
	c.st.moved.Add(uint64(max(n, 0)))
	return n
}

func (c *Coordinator) lease(ctx context.Context, instance string) bool {
	if c.opt.LeaseTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.LeaseTimeout)
		defer cancel()
	}
	ok, err := c.t.TryLease(ctx, instance, c.opt.LeaseTTL)
	switch {
	case err != nil:
		c.st.leaseErrors.Add(1)
		c.st.refused.Add(1)
		return false
	case ok:
		c.st.granted.Add(1)
	default:
		c.st.refused.Add(1)
	}
	return ok
}

// Leave removes this replica from the pool at once (see Transport.Leave).
func (c *Coordinator) Leave(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.leader.Store(false)
	c.wasLeader = false
	if err := c.t.Leave(ctx); err != nil {
		return fmt.Errorf("coord: leave %s: %w", c.me, err)
	}
	return nil
}

// Stats returns a snapshot of the counters. It does not block on I/O.
func (c *Coordinator) Stats() Stats {
	by, sums := c.clamped.snapshot()
	return Stats{
		ClampedBy:       by,
		ClampedSums:     sums,
		Replicas:        int(c.st.replicas.Load()),
		Leader:          c.st.leader.Load(),
		KeyDepthVersion: c.st.keyDepthVersion.Load(),
		Applied:         c.st.applied.Load(),
		Unknown:         c.st.unknown.Load(),
		Granted:         c.st.granted.Load(),
		Refused:         c.st.refused.Load(),
		LeaseErrors:     c.st.leaseErrors.Load(),
		Moved:           c.st.moved.Load(),
	}
}
