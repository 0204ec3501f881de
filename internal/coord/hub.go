package coord

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// HubOptions configures NewHub. Zero values mean the defaults written next
// to each field.
type HubOptions struct {
	// Now is the clock that TTLs, leases and delays run on (default
	// time.Now). The simulator passes its simulated clock.
	Now func() time.Time
	// Delay is how long what one replica publishes (presence and load,
	// the key-depth table, dispatch batches) takes to become visible to
	// the others (default 0: at once). A replica sees its own writes at
	// once. Leases are never delayed: they are decided by the hub, as by
	// Redis, when asked.
	Delay time.Duration
}

// Hub is the in-process transport: replicas of one process (the
// simulator's, or a test's) share it through their Links as replicas of
// several processes share a Redis. It keeps the same semantics: presence
// and load replaced by every beat and expiring after its TTL, a key-depth
// leader lease taken or renewed by beats and released by Leave, migration
// leases, one published key-depth table, and a log of dispatch batches that
// every Link reads in order. Safe for concurrent use; nothing blocks.
type Hub struct {
	now   func() time.Time
	delay time.Duration

	mu      sync.Mutex               // guards the fields below
	beats   map[string][]beatVersion // by replica, oldest first
	tables  []tableVersion           // oldest first
	leader  lease
	leases  map[string]lease // by instance
	log     []logEntry       // dispatch batches, in publication order
	logBase uint64           // sequence number of log[0]
	cursors map[string]uint64
}

// beatVersion is one beat as written: visible to the others from at+delay,
// expired at expires. gone marks a Leave.
type beatVersion struct {
	at, expires time.Time
	load        map[string]scheduler.Load
	gone        bool
}

type tableVersion struct {
	at    time.Time
	by    string // the writer
	table Table
}

type lease struct {
	holder  string
	expires time.Time
}

type logEntry struct {
	at    time.Time // published
	batch Batch
}

// NewHub returns an empty hub.
func NewHub(o HubOptions) *Hub {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Hub{
		now: o.Now, delay: max(o.Delay, 0),
		beats:   make(map[string][]beatVersion),
		leases:  make(map[string]lease),
		cursors: make(map[string]uint64),
	}
}

// Join returns the Transport of replica id. Its Receive starts with the
// dispatch batches the hub still holds (those some joined Link has not
// read yet). Join the same id once.
func (h *Hub) Join(id string) *Link {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.cursors[id]; !ok {
		h.cursors[id] = h.logBase
	}
	return &Link{hub: h, id: id}
}

// visible reports whether a write made at at by writer is visible to
// reader at now.
func (h *Hub) visible(writer, reader string, at, now time.Time) bool {
	return writer == reader || !at.Add(h.delay).After(now)
}

// Link is one replica's Transport over a Hub. Besides Transport it buffers
// the replica's dispatch records (Dispatched) until Flush publishes them.
type Link struct {
	hub *Hub
	id  string

	mu     sync.Mutex // guards outbox
	outbox []stamped
}

// stamped is a dispatch record with when it was recorded.
type stamped struct {
	at  time.Time
	rec Record
}

var _ Transport = (*Link)(nil)

// Replica implements Transport.
func (l *Link) Replica() string { return l.id }

// Beat implements Transport.
func (l *Link) Beat(_ context.Context, b Beat) (Seen, error) {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.beats[l.id] = append(h.beats[l.id], beatVersion{at: now, expires: now.Add(b.TTL), load: maps.Clone(b.Load)})
	h.prune(l.id, now)

	seen := Seen{Members: []string{l.id}}
	for id := range h.beats {
		if id == l.id {
			continue
		}
		if _, ok := h.beatOf(id, l.id, now); ok {
			seen.Members = append(seen.Members, id)
		}
	}
	slices.Sort(seen.Members)

	if h.leader.holder == "" || h.leader.holder == l.id || !h.leader.expires.After(now) {
		h.leader = lease{holder: l.id, expires: now.Add(b.TTL)}
	}
	seen.Leader = h.leader.holder == l.id

	for i := len(h.tables) - 1; i >= 0; i-- {
		if v := h.tables[i]; h.visible(v.by, l.id, v.at, now) {
			t := v.table
			t.Splits = slices.Clone(t.Splits)
			seen.Table = &t
			break
		}
	}
	return seen, nil
}

// beatOf returns replica id's latest beat visible to reader, if it is live.
func (h *Hub) beatOf(id, reader string, now time.Time) (beatVersion, bool) {
	vs := h.beats[id]
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if !h.visible(id, reader, v.at, now) {
			continue
		}
		if v.gone || !v.expires.After(now) {
			return beatVersion{}, false
		}
		return v, true
	}
	return beatVersion{}, false
}

// prune drops the versions of id's beats that every reader sees past, and
// forgets a replica gone for everyone.
func (h *Hub) prune(id string, now time.Time) {
	vs := h.beats[id]
	last := -1 // the newest version everyone sees
	for i, v := range vs {
		if !v.at.Add(h.delay).After(now) {
			last = i
		}
	}
	if last > 0 {
		vs = slices.Delete(vs, 0, last)
	}
	if len(vs) == 1 && (vs[0].gone || !vs[0].expires.After(now)) && !vs[0].at.Add(h.delay).After(now) {
		delete(h.beats, id)
		return
	}
	h.beats[id] = vs
}

// Collect implements Transport.
func (l *Link) Collect(_ context.Context, replicas []string, t *Table) ([]Peer, error) {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	var peers []Peer
	for _, id := range replicas {
		v, ok := h.beatOf(id, l.id, now)
		if !ok {
			continue
		}
		peers = append(peers, Peer{Replica: id, Load: maps.Clone(v.load)})
	}
	if t != nil {
		c := *t
		c.Splits = slices.Clone(t.Splits)
		h.tables = append(h.tables, tableVersion{at: now, by: l.id, table: c})
		// Keep the newest version everyone sees and those after it.
		last := -1
		for i, v := range h.tables {
			if !v.at.Add(h.delay).After(now) {
				last = i
			}
		}
		if last > 0 {
			h.tables = slices.Delete(h.tables, 0, last)
		}
	}
	return peers, nil
}

// TryLease implements Transport: decided at once, on the hub's clock.
func (l *Link) TryLease(_ context.Context, instance string, ttl time.Duration) (bool, error) {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	cur, ok := h.leases[instance]
	if ok && cur.holder != l.id && cur.expires.After(now) {
		return false, nil
	}
	h.leases[instance] = lease{holder: l.id, expires: now.Add(ttl)}
	return true, nil
}

// Leave implements Transport: the others stop seeing this replica after the
// hub's delay; the key-depth lease is released at once, and the Link no
// longer holds back the dispatch log (a later Receive starts with what the
// hub still holds).
func (l *Link) Leave(context.Context) error {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if _, ok := h.beats[l.id]; ok {
		h.beats[l.id] = append(h.beats[l.id], beatVersion{at: now, gone: true})
		h.prune(l.id, now)
	}
	if h.leader.holder == l.id {
		h.leader = lease{}
	}
	delete(h.cursors, l.id)
	h.trim()
	return nil
}

// Dispatched records that blocks were dispatched to instance, now, for the
// other replicas; Flush publishes it. It copies blocks.
func (l *Link) Dispatched(instance string, blocks []uint64) {
	if instance == "" || len(blocks) == 0 {
		return
	}
	now := l.hub.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outbox = append(l.outbox, stamped{at: now, rec: Record{Instance: instance, Blocks: slices.Clone(blocks)}})
}

// Flush publishes the records Dispatched since the last Flush, in order:
// one batch per run of records recorded at the same time, so that each
// keeps its own age. Call it as often as a Redis store would flush (the
// simulator flushes at each replica's coordination round).
func (l *Link) Flush() {
	l.mu.Lock()
	out := l.outbox
	l.outbox = nil
	l.mu.Unlock()
	if len(out) == 0 {
		return
	}
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].at.Equal(out[i].at) {
			j++
		}
		b := Batch{Replica: l.id, At: out[i].at, Records: make([]Record, 0, j-i)}
		for _, s := range out[i:j] {
			b.Records = append(b.Records, s.rec)
		}
		h.log = append(h.log, logEntry{at: now, batch: b})
		i = j
	}
}

// Receive implements Transport: the other replicas' batches visible now,
// in publication order. It never waits.
func (l *Link) Receive(context.Context) ([]Batch, error) {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	seq, ok := h.cursors[l.id]
	if !ok || seq < h.logBase {
		seq = h.logBase
	}
	var out []Batch
	for ; seq < h.logBase+uint64(len(h.log)); seq++ {
		e := h.log[seq-h.logBase]
		if !h.visible(e.batch.Replica, l.id, e.at, now) {
			break // entries are in publication order: the rest are later still
		}
		if e.batch.Replica != l.id {
			out = append(out, e.batch)
		}
	}
	h.cursors[l.id] = seq
	h.trim()
	return out, nil
}

// trim drops the log entries every joined Link has read.
func (h *Hub) trim() {
	low := h.logBase + uint64(len(h.log))
	for _, c := range h.cursors {
		low = min(low, c)
	}
	if n := int(low - h.logBase); n > 0 {
		clear(h.log[:n])
		h.log = h.log[n:]
		h.logBase = low
	}
}
