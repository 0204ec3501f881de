package coordtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
)

// Network is one transport under test.
type Network struct {
	// Join returns the node of replica id.
	Join func(t testing.TB, id string) Node
	// Now is the clock the transport's TTLs run on; Advance lets d of it
	// pass (a fake clock moves, a real one is slept on).
	Now     func() time.Time
	Advance func(d time.Duration)
}

// Node is one replica's end of a Network.
type Node struct {
	coord.Transport
	// Dispatched hands the transport a dispatch record; Flush publishes
	// what it holds.
	Dispatched func(instance string, blocks []uint64)
	Flush      func()
}

// The scenario's timings: short enough to play over a real Redis in a few
// seconds, long enough that the steps between two pauses stay far inside
// every TTL even on a busy machine.
const (
	Heartbeat = 200 * time.Millisecond // presence and the leader lease last 600ms
	LeaseTTL  = 500 * time.Millisecond
	Pause     = time.Second // past both
)

// Scenario plays three replicas r0, r1, r2 through net: heartbeat rounds
// (leader election, load merging, key-depth publication and drift), dispatch
// records, three rebalancing rounds (lease exclusivity, renewal, expiry),
// stale-data clearing, and two leader handovers (through expiry, then
// through a clean Leave), and a crash. It returns a log of what every step
// produced: two transports that behave alike return the same log. It also
// checks what the coordination promises, so that it fails even when
// transports agree.
func Scenario(t testing.TB, net Network) []string {
	t.Helper()
	ctx := context.Background()
	ids := []string{"i0", "i1", "i2", "i3"}
	type replica struct {
		name string
		node Node
		s    *Scheduler
		c    *coord.Coordinator
	}
	reps := make([]*replica, 3)
	for i := range reps {
		name := fmt.Sprintf("r%d", i)
		n := net.Join(t, name)
		s := NewScheduler(ids...)
		c, err := coord.New(n.Transport, s, coord.Options{Heartbeat: Heartbeat, LeaseTTL: LeaseTTL, LeaseTimeout: time.Second, Now: net.Now})
		if err != nil {
			t.Fatalf("coord.New(%s) error = %v", name, err)
		}
		reps[i] = &replica{name: name, node: n, s: s, c: c}
	}
	r0, r1, r2 := reps[0], reps[1], reps[2]
	var log []string
	logf := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }

	// state logs and returns a replica's coordination state.
	state := func(step string, r *replica) coord.Stats {
		st := r.c.Stats()
		logf("%s: %s leader=%v replicas=%d kd=v%d %v remote=%s", step, r.name, st.Leader, st.Replicas, st.KeyDepthVersion, r.s.KeyDepthState().Splits, loads(r.s.Remote()))
		return st
	}
	round := func(step string, order ...*replica) map[string]coord.Stats {
		for _, r := range order {
			if err := r.c.Sync(ctx); err != nil {
				t.Fatalf("%s: %s.Sync() error = %v", step, r.name, err)
			}
		}
		st := map[string]coord.Stats{}
		for _, r := range order {
			st[r.name] = state(step, r)
		}
		return st
	}
	expectLeader := func(step string, st map[string]coord.Stats, want *replica) {
		t.Helper()
		for name, s := range st {
			if s.Leader != (name == want.name) {
				t.Errorf("%s: %s Stats().Leader = %v, want the leader to be %s", step, name, s.Leader, want.name)
			}
		}
	}
	expectKD := func(step string, want []uint64, version int64, rs ...*replica) {
		t.Helper()
		for _, r := range rs {
			if got := r.s.KeyDepthState().Splits; !slices.Equal(got, want) || r.c.Stats().KeyDepthVersion != version {
				t.Errorf("%s: %s key depth %v v%d, want %v v%d", step, r.name, got, r.c.Stats().KeyDepthVersion, want, version)
			}
		}
	}
	expectRemote := func(step string, r *replica, others ...*replica) {
		t.Helper()
		want := map[string]scheduler.Load{}
		for _, o := range others {
			m := map[string]scheduler.Load{}
			o.s.LocalLoad(m)
			for id, l := range m {
				w := want[id]
				w.Queued += l.Queued
				w.QueuedTokens += l.QueuedTokens
				w.PendingTokens += l.PendingTokens
				w.Running += l.Running
				want[id] = w
			}
		}
		if got, w := loads(r.s.Remote()), loads(want); got != w {
			t.Errorf("%s: %s remote loads %s, want %s", step, r.name, got, w)
		}
		if got := r.c.Stats().Replicas; got != len(others) {
			t.Errorf("%s: %s Stats().Replicas = %d, want %d", step, r.name, got, len(others))
		}
	}

	r0.s.SetLocal("i0", scheduler.Load{Queued: 1, QueuedTokens: 100})
	r1.s.SetLocal("i0", scheduler.Load{Running: 2, PendingTokens: 50})
	r1.s.SetLocal("i1", scheduler.Load{Queued: 3, QueuedTokens: 300})
	r2.s.SetLocal("i2", scheduler.Load{Running: 1})
	r2.s.SetLocal("i3", scheduler.Load{PendingTokens: 7})
	r0.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{7, 42}})
	r1.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{1}})

	// The first replica to beat leads; each sees those that beat before.
	st := round("round 1", r0, r1, r2)
	expectLeader("round 1", st, r0)
	expectRemote("round 1", r0)
	expectRemote("round 1", r1, r0)
	expectRemote("round 1", r2, r0, r1)
	expectKD("round 1", []uint64{7, 42}, 1, r0, r1, r2)

	// The leader's table changes: a new version reaches every replica in
	// the next round.
	r0.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{7, 42, 99}})
	st = round("round 2", r0, r1, r2)
	expectLeader("round 2", st, r0)
	expectRemote("round 2", r0, r1, r2)
	expectRemote("round 2", r1, r0, r2)
	expectRemote("round 2", r2, r0, r1)
	expectKD("round 2", []uint64{7, 42, 99}, 2, r0, r1, r2)

	// A follower's own drift is undone by the next round, at the same
	// version.
	r2.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{5}})
	round("round 2b", r0, r1, r2)
	expectKD("round 2b", []uint64{7, 42, 99}, 2, r0, r1, r2)

	// Dispatch records reach the other replicas, not their publisher; one
	// for an instance nobody has is counted as unknown.
	r1.node.Dispatched("i1", []uint64{1, 2, 3})
	r2.node.Dispatched("i3", []uint64{9})
	r2.node.Dispatched("x", []uint64{5})
	r1.node.Flush()
	r2.node.Flush()
	wantCached := map[string]string{"r0": "i1[1 2 3] i3[9]", "r1": "i3[9]", "r2": "i1[1 2 3]"}
	for _, r := range reps {
		if err := r.c.Receive(ctx); err != nil {
			t.Fatalf("%s.Receive() error = %v", r.name, err)
		}
		got := cached(r.s.TakeCached())
		logf("dispatch: %s cached %s, unknown %d", r.name, got, r.c.Stats().Unknown)
		if got != wantCached[r.name] {
			t.Errorf("dispatch: %s cached %q, want %q", r.name, got, wantCached[r.name])
		}
	}

	// Leases: one replica per source instance; the holder renews; after
	// expiry whoever asks first gets it.
	mv := func(from, to string) scheduler.Move { return scheduler.Move{From: from, To: to} }
	r0.s.SetPlan(mv("i0", "i1"), mv("i0", "i2"))
	r1.s.SetPlan(mv("i0", "i2"), mv("i1", "i3"))
	r2.s.SetPlan(mv("i1", "i0"))
	rebalance := func(step string, want map[string]string, order ...*replica) {
		t.Helper()
		for _, r := range order {
			n := r.c.Rebalance(ctx)
			got := moves(r.s.TakeApplied())
			logf("%s: %s applied %d: %s", step, r.name, n, got)
			if got != want[r.name] {
				t.Errorf("%s: %s applied %q, want %q", step, r.name, got, want[r.name])
			}
		}
	}
	rebalance("leases A", map[string]string{"r0": "i0>i1 i0>i2", "r1": "i1>i3", "r2": ""}, r0, r1, r2)
	rebalance("leases B", map[string]string{"r0": "i0>i1 i0>i2", "r1": "i1>i3", "r2": ""}, r2, r1, r0)
	net.Advance(Pause)

	// Nobody synced for 3 heartbeats: remote loads are cleared.
	for _, r := range reps {
		r.c.Expire()
		state("stale", r)
		expectRemote("stale", r)
	}
	rebalance("leases C", map[string]string{"r0": "", "r1": "i0>i2", "r2": "i1>i0"}, r2, r1, r0)

	// The leader lease expired: r1, first to beat, leads, starting from
	// the published table rather than its own.
	r1.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{1}})
	st = round("round 3", r1, r0, r2)
	expectLeader("round 3", st, r1)
	expectKD("round 3", []uint64{7, 42, 99}, 3, r0, r1, r2)
	expectRemote("round 3", r1)
	expectRemote("round 3", r0, r1)
	expectRemote("round 3", r2, r0, r1)

	// r1 leaves cleanly: its load goes at once and r2 takes over.
	if err := r1.c.Leave(ctx); err != nil {
		t.Fatalf("r1.Leave() error = %v", err)
	}
	st = round("round 4", r2, r0)
	expectLeader("round 4", st, r2)
	expectKD("round 4", []uint64{7, 42, 99}, 4, r0, r2)
	expectRemote("round 4", r2, r0)
	expectRemote("round 4", r0, r2)

	// r2 crashes (no Leave): its lease and load expire.
	net.Advance(Pause)
	st = round("round 5", r0)
	expectLeader("round 5", st, r0)
	expectKD("round 5", []uint64{7, 42, 99}, 5, r0)
	expectRemote("round 5", r0)

	for _, r := range reps {
		s := r.c.Stats()
		logf("end: %s granted=%d refused=%d moved=%d applied=%d unknown=%d", r.name, s.Granted, s.Refused, s.Moved, s.Applied, s.Unknown)
		if s.LeaseErrors != 0 {
			t.Errorf("%s: Stats().LeaseErrors = %d, want 0", r.name, s.LeaseErrors)
		}
	}
	return log
}

// loads renders the non-zero loads, by instance.
func loads(m map[string]scheduler.Load) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if l := m[id]; l != (scheduler.Load{}) {
			parts = append(parts, fmt.Sprintf("%s%+v", id, l))
		}
	}
	return strings.Join(parts, " ")
}

func cached(cs []Cached) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s%v", c.Instance, c.Blocks))
	}
	return strings.Join(parts, " ")
}

func moves(ms []scheduler.Move) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.From+">"+m.To)
	}
	return strings.Join(parts, " ")
}

// HubNetwork is a Network over a new Hub with a fake clock and no delay.
func HubNetwork() Network {
	clock := NewClock()
	hub := coord.NewHub(coord.HubOptions{Now: clock.Now})
	return Network{
		Join: func(_ testing.TB, id string) Node {
			l := hub.Join(id)
			return Node{Transport: l, Dispatched: l.Dispatched, Flush: l.Flush}
		},
		Now:     clock.Now,
		Advance: clock.Advance,
	}
}
