package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/redis/go-redis/v9"
)

// kvView records what a replica's index was told, per instance: the keys
// it holds and whether it is exact (the pool's Sink does the same to the
// scheduler, whose index has no listing).
type kvView struct {
	mu    sync.Mutex
	keys  map[string]map[uint64]bool
	exact map[string]bool
}

func newKVView() *kvView {
	return &kvView{keys: map[string]map[uint64]bool{}, exact: map[string]bool{}}
}

func (v *kvView) set(id string) map[uint64]bool {
	s := v.keys[id]
	if s == nil {
		s = map[uint64]bool{}
		v.keys[id] = s
	}
	return s
}

func (v *kvView) Stored(id string, keys []uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.set(id)
	for _, k := range keys {
		s[k] = true
	}
}

func (v *kvView) Removed(id string, keys []uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.set(id)
	for _, k := range keys {
		delete(s, k)
	}
}

func (v *kvView) Cleared(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.set(id))
}

func (v *kvView) SetExact(id string, exact bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.exact[id] = exact
}

// of returns instance id's sorted keys and whether it is exact.
func (v *kvView) of(id string) ([]uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.keys[id])), v.exact[id]
}

// kvReplica is one router replica's relay over its own store.
type kvReplica struct {
	store  *RedisStore
	relay  *KVRelay
	view   *kvView
	cancel context.CancelFunc
	done   chan error
}

func startKVReplica(t *testing.T, addr, name string, known []string, mod func(*RedisOptions, *KVRelayOptions)) *kvReplica {
	t.Helper()
	opt := RedisOptions{Addrs: []string{addr}, Pool: "kv", Replica: name, Logger: quietLogger()}
	ropt := KVRelayOptions{Known: func(id string) bool { return slices.Contains(known, id) }}
	if mod != nil {
		mod(&opt, &ropt)
	}
	s, err := NewRedis(opt)
	if err != nil {
		t.Fatal(err)
	}
	r := &kvReplica{store: s, view: newKVView(), done: make(chan error, 1)}
	if r.relay, err = NewKVRelay(s, r.view, ropt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.relay.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *kvReplica) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run() = %v", err)
		}
	case <-time.After(loadedFloor):
		t.Errorf("Run() did not return within %v of cancel", loadedFloor)
	}
	_ = r.store.Close()
}

// kvEngine publishes vLLM-format events for one instance, dialling the
// bind-mode subscriber as llm-d's simulator does.
type kvEngine struct {
	pub *kvevents.Publisher
	bs  int
}

func (e *kvEngine) publish(t *testing.T, evs ...kvevents.Event) {
	t.Helper()
	if err := e.pub.Publish(float64(time.Now().UnixNano())/1e9, evs, -1); err != nil {
		t.Fatal(err)
	}
}

// stored is the event of an engine storing the blocks of toks; its engine
// hashes are its own (not the router's), derived from seed.
func (e *kvEngine) stored(seed uint64, toks []uint32) (kvevents.Event, []uint64) {
	n := len(toks) / e.bs
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = seed<<20 | uint64(i) + 1
	}
	return kvevents.Event{Kind: kvevents.BlockStored, Hashes: hs, Tokens: toks[:n*e.bs], BlockSize: e.bs}, hs
}

// subscribe runs a bind-mode subscriber feeding target and returns the
// address it listens on.
func subscribe(t *testing.T, members []string, target kvevents.Target) string {
	t.Helper()
	sub, err := kvevents.New(kvevents.Config{Pool: "kv", Mode: kvevents.Bind, Bind: "tcp://127.0.0.1:0", BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx, func() []string { return members }, target) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(loadedFloor):
			t.Error("subscriber did not stop")
		}
	})
	ready, addr := sub.Listening()
	select {
	case <-ready:
	case <-time.After(loadedFloor):
		t.Fatal("bind mode not listening")
	}
	return addr().String()
}

// agree reports "" when every replica's view of id equals want's.
func agree(id string, want *kvView, rs ...*kvReplica) string {
	wk, we := want.of(id)
	for i, r := range rs {
		k, e := r.view.of(id)
		if e != we || !slices.Equal(k, wk) {
			return fmt.Sprintf("replica %d: %d blocks, exact %v; the subscriber's: %d blocks, exact %v", i, len(k), e, len(wk), we)
		}
	}
	return ""
}

// TestKVRelayThreeReplicas: three replicas, the engine dials one of them
// (bind mode); the other two agree with it block for block after a burst
// of stores and removals, and a follower restarted cold rebuilds from the
// stream.
func TestKVRelayThreeReplicas(t *testing.T) {
	addr, _, _ := startRedis(t)
	inst := "10.0.0.7:8000"
	known := []string{inst}
	a := startKVReplica(t, addr, "a", known, nil)
	b := startKVReplica(t, addr, "b", known, nil)
	c := startKVReplica(t, addr, "c", known, nil)
	bind := subscribe(t, known, a.relay)
	p, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://" + bind, Mode: kvevents.Connect, Topic: "kv@" + inst + "@m", Encoding: kvevents.Maps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	e := &kvEngine{pub: p, bs: 4}

	// The subscriber's view becomes exact once it sees a cache clear (it
	// joined after the engine's first batch).
	eventually(t, 5*time.Second, func() string {
		e.publish(t, kvevents.Event{Kind: kvevents.AllBlocksCleared})
		if _, ex := a.view.of(inst); !ex {
			return "the subscriber's view is not exact"
		}
		return ""
	})

	// A burst: 200 prompts of 16 blocks, every third one evicted.
	var want int
	for i := range 200 {
		toks := make([]uint32, 64)
		for j := range toks {
			toks[j] = uint32(i*1000 + j)
		}
		ev, hs := e.stored(uint64(i), toks)
		evs := []kvevents.Event{ev}
		want += len(hs)
		if i%3 == 0 {
			evs = append(evs, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: hs[8:]})
			want -= 8
		}
		e.publish(t, evs...)
	}
	eventually(t, 5*time.Second, func() string {
		if k, _ := a.view.of(inst); len(k) != want {
			return fmt.Sprintf("subscriber holds %d blocks, want %d", len(k), want)
		}
		return ""
	})
	took := eventually(t, 2*time.Second, func() string { return agree(inst, a.view, b, c) })
	t.Logf("followers agree %v after the subscriber's last block", took.Round(time.Millisecond))

	// One follower restarts cold: it reads the stream from its
	// beginning.
	c.stop(t)
	c = startKVReplica(t, addr, "c", known, nil)
	eventually(t, 2*time.Second, func() string { return agree(inst, a.view, b, c) })

	// Then the engine clears its cache: everybody holds nothing, still
	// exact.
	e.publish(t, kvevents.Event{Kind: kvevents.AllBlocksCleared})
	eventually(t, 2*time.Second, func() string {
		if k, _ := a.view.of(inst); len(k) != 0 {
			return "subscriber not cleared"
		}
		return agree(inst, a.view, b, c)
	})
	if st := a.relay.Stats(); st.Dropped != 0 || st.Published == 0 {
		t.Errorf("relaying replica's stats %+v: want writes and no drops", st)
	}
	if st := b.relay.Stats(); st.Applied == 0 {
		t.Errorf("follower applied nothing: %+v", st)
	}
}

// TestKVRelayDropsSnapshotted: with a buffer smaller than a burst, the
// operations dropped are replaced by a snapshot of the instance, and a
// restarted follower is whole again (from the stream, whose periodic
// snapshots make a trimmed one whole too; Redis trims MAXLEN ~ by whole
// nodes of 100 entries, so this stream is not trimmed here).
func TestKVRelayDropsSnapshotted(t *testing.T) {
	addr, _, _ := startRedis(t)
	inst := "10.0.0.8:8000"
	known := []string{inst}
	small := func(_ *RedisOptions, r *KVRelayOptions) {
		r.StreamMaxLen, r.SnapshotEvery, r.Buffer = 4, 200*time.Millisecond, 64
	}
	a := startKVReplica(t, addr, "a", known, small)
	b := startKVReplica(t, addr, "b", known, small)
	// The relaying replica's subscriber, driven directly: stores of 16
	// blocks, 50 of them, faster than a flush.
	a.relay.SetExact(inst, true)
	a.relay.Cleared(inst)
	for i := range 50 {
		keys := make([]uint64, 16)
		for j := range keys {
			keys[j] = uint64(i*100 + j + 1)
		}
		a.relay.Stored(inst, keys)
	}
	eventually(t, 2*time.Second, func() string { return agree(inst, a.view, b) })
	b.stop(t)
	b = startKVReplica(t, addr, "b", known, small)
	eventually(t, 2*time.Second, func() string { return agree(inst, a.view, b) })
	if st := a.relay.Stats(); st.Dropped == 0 || st.Snapshots == 0 {
		t.Errorf("stats %+v: want drops (the buffer holds 64 keys) and snapshots", st)
	}
	if k, _ := a.view.of(inst); len(k) != 800 {
		t.Errorf("subscriber holds %d blocks, want 800", len(k))
	}
}

// TestKVRelayHostileEntries: entries others wrote are validated like any
// Redis input: malformed, oversized, unsigned (with record keys) and
// unknown-instance entries are counted and not applied; a signed one is.
func TestKVRelayHostileEntries(t *testing.T) {
	addr, _, _ := startRedis(t)
	inst := "10.0.0.9:8000"
	key := []byte("0123456789abcdef0123")
	withKey := func(o *RedisOptions, r *KVRelayOptions) { o.RecordKeys = [][]byte{key}; r.SnapshotEvery = -1 }
	b := startKVReplica(t, addr, "b", []string{inst}, withKey)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	stream := newKeys(DefaultPrefix, "kv").tag + ":kvev"
	add := func(replica string, d []byte) {
		t.Helper()
		if err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: []any{"r", replica, "d", d}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(id string, keys ...uint64) []byte {
		return encodeKV([]kvOp{{kind: kvExact, id: id}, {kind: kvStored, id: id, keys: keys}}, 4096, time.Now())[0]
	}
	sealed := func(d []byte) []byte { return sealKV(key, "kv", "x", d) }

	add("x", entry(inst, 1, 2, 3))                                                  // unsigned
	add("x", sealKV([]byte("another key of 16+ bytes"), "kv", "x", entry(inst, 4))) // wrong key
	add("y", sealed(entry(inst, 5)))                                                // signed for another replica
	add("x", sealed([]byte{9, 9, 9}))                                               // malformed
	add("x", sealed(append(entry(inst), 1, 200, 1)))                                // truncated operation
	add("x", sealed(make([]byte, DefaultKVMaxEntryBytes+1)))                        // oversized
	add("x", sealed(entry("10.9.9.9:1", 6)))                                        // unknown instance
	add("x", sealed(entry(inst, 7, 8)))                                             // good
	eventually(t, 2*time.Second, func() string {
		st := b.store.Stats()
		if st.Unsigned != 3 || st.Malformed != 2 || st.Oversized != 1 || st.Ignored != 2 {
			return fmt.Sprintf("stats %+v: want 3 unsigned, 2 malformed, 1 oversized, 2 ignored", st)
		}
		if k, ex := b.view.of(inst); !ex || !slices.Equal(k, []uint64{7, 8}) {
			return fmt.Sprintf("view %v exact %v, want [7 8] exact", k, ex)
		}
		return ""
	})
}

// TestKVCodecRoundTrip: operations survive encoding, cut into entries
// within the bound.
func TestKVCodecRoundTrip(t *testing.T) {
	keys := make([]uint64, 5000)
	for i := range keys {
		keys[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	ops := []kvOp{{kind: kvExact, id: "a:1"}, {kind: kvCleared, id: "a:1"}, {kind: kvStored, id: "a:1", keys: keys}, {kind: kvRemoved, id: "b:2", keys: keys[:3]}, {kind: kvInexact, id: "b:2"}}
	entries := encodeKV(ops, 1024, time.Now())
	if len(entries) < 40 {
		t.Fatalf("%d entries for 5000 keys in 1 KiB entries", len(entries))
	}
	var got []kvOp
	for _, e := range entries {
		if len(e) > 1024 {
			t.Fatalf("entry of %d bytes, over 1024", len(e))
		}
		var err error
		if got, _, err = decodeKV(string(e), got); err != nil {
			t.Fatal(err)
		}
	}
	var stored []uint64
	var kinds []kvKind
	for _, op := range got {
		if len(kinds) == 0 || kinds[len(kinds)-1] != op.kind {
			kinds = append(kinds, op.kind)
		}
		if op.kind == kvStored {
			stored = append(stored, op.keys...)
		}
	}
	if !slices.Equal(stored, keys) || !slices.Equal(kinds, []kvKind{kvExact, kvCleared, kvStored, kvRemoved, kvInexact}) {
		t.Errorf("round trip: %d keys, kinds %v", len(stored), kinds)
	}
}

// FuzzKVDecode: any entry decodes or errs, within its own size, and what
// decodes encodes back to the same operations.
func FuzzKVDecode(f *testing.F) {
	f.Add(string(encodeKV([]kvOp{{kind: kvStored, id: "a", keys: []uint64{1, 2}}, {kind: kvExact, id: "a"}}, 4096, time.Unix(1, 0))[0]))
	f.Add("\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01a\xff\xff\xff\xff\x0f")
	f.Fuzz(func(t *testing.T, b string) {
		ops, _, err := decodeKV(b, nil)
		if err != nil {
			return
		}
		n := 0
		for _, op := range ops {
			n += len(op.keys)
		}
		if 8*n > len(b) {
			t.Fatalf("%d keys from %d bytes", n, len(b))
		}
		if len(ops) == 0 {
			return
		}
		again, _, err := decodeKV(string(encodeKV(ops, 1<<20, time.Unix(0, 0))[0]), nil)
		if err != nil || len(again) != len(ops) {
			t.Fatalf("re-encoded: %d ops, err %v; want %d", len(again), err, len(ops))
		}
	})
}

// TestKVRelayHandover: the engine's connection moves from one replica to
// another (a restart, a load balancer): the replica that stopped hearing
// it takes the other's view once Handover has passed, from its periodic
// snapshot, and stops relaying its own stale one.
func TestKVRelayHandover(t *testing.T) {
	addr, _, _ := startRedis(t)
	inst := "10.0.0.10:8000"
	known := []string{inst}
	quick := func(_ *RedisOptions, r *KVRelayOptions) {
		r.Handover, r.SnapshotEvery = 100*time.Millisecond, 200*time.Millisecond
	}
	a := startKVReplica(t, addr, "a", known, quick)
	b := startKVReplica(t, addr, "b", known, quick)
	a.relay.SetExact(inst, true)
	a.relay.Cleared(inst)
	a.relay.Stored(inst, []uint64{1, 2})
	eventually(t, 2*time.Second, func() string { return agree(inst, a.view, b) })
	// Now b hears the engine, as its tracker reports a stream that
	// starts with a cache clear: cleared, exact (cleared again), new
	// blocks.
	b.relay.Cleared(inst)
	b.relay.SetExact(inst, true)
	b.relay.Cleared(inst)
	b.relay.Stored(inst, []uint64{3, 4})
	eventually(t, 2*time.Second, func() string {
		if k, ex := a.view.of(inst); !ex || !slices.Equal(k, []uint64{3, 4}) {
			return fmt.Sprintf("the replica that stopped hearing the engine holds %v (exact %v), want [3 4]", k, ex)
		}
		return agree(inst, b.view, a)
	})
	if st := a.relay.Stats(); st.Handovers != 1 {
		t.Errorf("handovers %d, want 1", st.Handovers)
	}
	if k, _ := b.view.of(inst); !slices.Equal(k, []uint64{3, 4}) {
		t.Errorf("the replica hearing the engine holds %v, want [3 4] (its own view)", k)
	}
}

// TestKVRelayForgetsGone: an instance that left the pool is dropped from
// the relaying replica's mirror at the next snapshot instead of being
// written whole every period.
func TestKVRelayForgetsGone(t *testing.T) {
	addr, _, _ := startRedis(t)
	var mu sync.Mutex
	members := map[string]bool{"10.0.0.11:8000": true}
	a := startKVReplica(t, addr, "a", nil, func(_ *RedisOptions, r *KVRelayOptions) {
		r.SnapshotEvery = 50 * time.Millisecond
		r.Known = func(id string) bool { mu.Lock(); defer mu.Unlock(); return members[id] }
	})
	a.relay.Stored("10.0.0.11:8000", []uint64{1})
	mirrored := func() bool {
		a.relay.mu.Lock()
		defer a.relay.mu.Unlock()
		return a.relay.mirror["10.0.0.11:8000"] != nil
	}
	if !mirrored() {
		t.Fatal("the instance heard is not in the mirror")
	}
	mu.Lock()
	delete(members, "10.0.0.11:8000")
	mu.Unlock()
	eventually(t, time.Second, func() string {
		if mirrored() {
			return "the instance that left is still in the mirror"
		}
		return ""
	})
}

// TestKVRelayWrongType: a relay stream someone replaced with a string is
// an outage (as for the store's own keys) that ends once the key is a
// stream again, and the relay goes on.
func TestKVRelayWrongType(t *testing.T) {
	addr, _, _ := startRedis(t)
	inst := "10.0.0.12:8000"
	known := []string{inst}
	a := startKVReplica(t, addr, "a", known, nil)
	b := startKVReplica(t, addr, "b", known, nil)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	stream := newKeys(DefaultPrefix, "kv").tag + ":kvev"
	if err := rdb.Set(context.Background(), stream, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, func() string {
		if b.store.Stats().Up {
			return "the store is up while its relay stream is a string"
		}
		return ""
	})
	if err := rdb.Del(context.Background(), stream).Err(); err != nil {
		t.Fatal(err)
	}
	a.relay.SetExact(inst, true)
	a.relay.Cleared(inst)
	a.relay.Stored(inst, []uint64{42})
	eventually(t, 5*time.Second, func() string {
		if !b.store.Stats().Up {
			return "the store is still down after the stream key was deleted"
		}
		return agree(inst, a.view, b)
	})
}
