package coord_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/coord/coordtest"
	"github.com/dualmap/dualmap/scheduler"
)

const hb = 100 * time.Millisecond

// pool is K replicas over one hub with a fake clock.
type pool struct {
	clock *coordtest.Clock
	hub   *coord.Hub
	reps  []*member
}

type member struct {
	link *coord.Link
	s    *coordtest.Scheduler
	c    *coord.Coordinator
}

func newPool(t *testing.T, k int, delay time.Duration) *pool {
	t.Helper()
	p := &pool{clock: coordtest.NewClock()}
	p.hub = coord.NewHub(coord.HubOptions{Now: p.clock.Now, Delay: delay})
	for i := range k {
		p.reps = append(p.reps, p.join(t, string(rune('a'+i)), p.hub.Join(string(rune('a'+i)))))
	}
	return p
}

func (p *pool) join(t *testing.T, id string, tr coord.Transport) *member {
	t.Helper()
	s := coordtest.NewScheduler("i0", "i1", "i2")
	c, err := coord.New(tr, s, coord.Options{Heartbeat: hb, Now: p.clock.Now})
	if err != nil {
		t.Fatalf("coord.New(%s) error = %v", id, err)
	}
	l, _ := tr.(*coord.Link)
	return &member{link: l, s: s, c: c}
}

func (m *member) sync(t *testing.T) {
	t.Helper()
	if err := m.c.Sync(context.Background()); err != nil {
		t.Fatalf("%s: Sync() error = %v", m.c.Replica(), err)
	}
}

func splits(m *member) []uint64 { return m.s.KeyDepthState().Splits }

func TestScenarioHub(t *testing.T) {
	for _, line := range coordtest.Scenario(t, coordtest.HubNetwork()) {
		t.Log(line)
	}
}

func TestLeaderElectionAndHandover(t *testing.T) {
	p := newPool(t, 3, 0)
	a, b, c := p.reps[0], p.reps[1], p.reps[2]
	a.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{3, 4}})
	for _, m := range p.reps {
		m.sync(t)
	}
	if !a.c.Stats().Leader || b.c.Stats().Leader || c.c.Stats().Leader {
		t.Fatalf("leaders a=%v b=%v c=%v, want only a (first to beat)", a.c.Stats().Leader, b.c.Stats().Leader, c.c.Stats().Leader)
	}
	for _, m := range []*member{b, c} {
		if got := splits(m); !slices.Equal(got, []uint64{3, 4}) {
			t.Errorf("%s: splits %v, want the leader's [3 4]", m.c.Replica(), got)
		}
	}

	// a crashes: within 3 heartbeats its lease is still held.
	p.clock.Advance(2 * hb)
	b.sync(t)
	if b.c.Stats().Leader {
		t.Fatalf("b leads %v after a's last beat, want a's lease still held", 2*hb)
	}
	// Past 3 heartbeats b takes over, from the published table, not its
	// own, and publishes a new version.
	p.clock.Advance(2 * hb)
	b.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{9}})
	b.sync(t)
	c.sync(t)
	if !b.c.Stats().Leader || c.c.Stats().Leader {
		t.Fatalf("after a's lease expired: leaders b=%v c=%v, want b", b.c.Stats().Leader, c.c.Stats().Leader)
	}
	if got := splits(b); !slices.Equal(got, []uint64{3, 4}) {
		t.Errorf("new leader's splits %v, want the adopted [3 4]", got)
	}
	if got := c.c.Stats().KeyDepthVersion; got != 2 {
		t.Errorf("c: KeyDepthVersion = %d, want 2 (b's first publication)", got)
	}
	if got := c.c.Stats().Replicas; got != 1 {
		t.Errorf("c: Replicas = %d after a crashed, want 1", got)
	}

	// b leaves cleanly: c takes over at its next beat.
	if err := b.c.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.c.Stats().Leader {
		t.Error("b: Leader after Leave, want false")
	}
	c.sync(t)
	if !c.c.Stats().Leader || c.c.Stats().Replicas != 0 {
		t.Errorf("c after b left: Leader=%v Replicas=%d, want true, 0", c.c.Stats().Leader, c.c.Stats().Replicas)
	}
}

func TestLeases(t *testing.T) {
	p := newPool(t, 2, 0)
	a, b := p.reps[0], p.reps[1]
	ctx := context.Background()
	a.s.SetPlan(scheduler.Move{From: "i0", To: "i1"}, scheduler.Move{From: "i1", To: "i2"})
	b.s.SetPlan(scheduler.Move{From: "i0", To: "i2"})
	tests := []struct {
		name    string
		advance time.Duration
		m       *member
		want    int
	}{
		{"a takes i0 and i1", 0, a, 2},
		{"b refused i0", 0, b, 0},
		{"a renews", coord.DefaultLeaseTTL / 2, a, 2},
		{"b still refused after a renewal", coord.DefaultLeaseTTL * 3 / 4, b, 0},
		{"b takes i0 once a's lease expired", coord.DefaultLeaseTTL, b, 1},
		{"a keeps only i1", 0, a, 1},
	}
	for _, tt := range tests {
		p.clock.Advance(tt.advance)
		if got := tt.m.c.Rebalance(ctx); got != tt.want {
			t.Errorf("%s: Rebalance() = %d, want %d", tt.name, got, tt.want)
		}
		tt.m.s.TakeApplied()
	}
	if st := a.c.Stats(); st.Granted != 5 || st.Refused != 1 || st.Moved != 5 {
		t.Errorf("a: Stats() Granted=%d Refused=%d Moved=%d, want 5, 1, 5", st.Granted, st.Refused, st.Moved)
	}
}

// failing is a transport that fails while down.
type failing struct {
	coord.Transport
	down bool
}

var errDown = errors.New("down")

func (f *failing) Beat(ctx context.Context, b coord.Beat) (coord.Seen, error) {
	if f.down {
		return coord.Seen{}, errDown
	}
	return f.Transport.Beat(ctx, b)
}

func (f *failing) TryLease(ctx context.Context, instance string, ttl time.Duration) (bool, error) {
	if f.down {
		return false, errDown
	}
	return f.Transport.TryLease(ctx, instance, ttl)
}

func TestStaleLoadsCleared(t *testing.T) {
	p := newPool(t, 1, 0)
	other := p.reps[0]
	f := &failing{Transport: p.hub.Join("me")}
	me := p.join(t, "me", f)
	other.s.SetLocal("i1", scheduler.Load{Running: 4})
	other.sync(t)
	me.sync(t)
	if got := me.s.Remote()["i1"]; got.Running != 4 {
		t.Fatalf("remote i1 = %+v, want Running 4", got)
	}
	if !other.c.Stats().Leader || me.c.Stats().Leader {
		t.Fatal("the first replica to beat does not lead")
	}

	f.down = true
	for i := 1; i <= 4; i++ {
		p.clock.Advance(hb)
		if err := me.c.Sync(context.Background()); !errors.Is(err, errDown) {
			t.Fatalf("Sync() with the transport down = %v, want errDown", err)
		}
		got := me.s.Remote()["i1"].Running
		if want := 4; i <= 3 && got != want {
			t.Errorf("after %d failed heartbeats: remote i1 Running = %d, want %d (kept for 3 heartbeats)", i, got, want)
		}
		if i == 4 && (got != 0 || me.c.Stats().Replicas != 0) {
			t.Errorf("after 4 failed heartbeats: remote i1 Running = %d, Replicas = %d; want 0, 0", got, me.c.Stats().Replicas)
		}
		if me.c.Stats().Leader {
			t.Errorf("Leader after a failed Sync, want false")
		}
	}
	// Expire does the same for a caller that skips Sync while backing off.
	f.down = false
	p.clock.Advance(hb)
	other.sync(t)
	me.sync(t)
	if got := me.s.Remote()["i1"].Running; got != 4 {
		t.Fatalf("after recovery: remote i1 Running = %d, want 4", got)
	}
	me.c.Expire()
	if got := me.s.Remote()["i1"].Running; got != 4 {
		t.Errorf("Expire() right after a Sync cleared the loads")
	}
	p.clock.Advance(3*hb + time.Millisecond)
	me.c.Expire()
	if got := me.s.Remote()["i1"].Running; got != 0 {
		t.Errorf("Expire() 3 heartbeats after the last Sync: remote i1 Running = %d, want 0", got)
	}

	// A lease the transport cannot answer is not held.
	f.down = true
	me.s.SetPlan(scheduler.Move{From: "i0", To: "i1"})
	if n := me.c.Rebalance(context.Background()); n != 0 || me.c.Stats().LeaseErrors != 1 {
		t.Errorf("Rebalance() with the transport down = %d, LeaseErrors %d; want 0, 1", n, me.c.Stats().LeaseErrors)
	}
}

func TestDispatchMerge(t *testing.T) {
	p := newPool(t, 3, 0)
	a, b, c := p.reps[0], p.reps[1], p.reps[2]
	ctx := context.Background()
	t0 := p.clock.Now()
	a.link.Dispatched("i0", []uint64{1, 2})
	p.clock.Advance(time.Second)
	a.link.Dispatched("i1", []uint64{3})
	a.link.Dispatched("nope", []uint64{4})
	blocks := []uint64{5, 6}
	b.link.Dispatched("i2", blocks)
	blocks[0] = 99 // Dispatched copied them
	a.link.Flush()
	b.link.Flush()
	for _, m := range p.reps {
		if err := m.c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	render := func(cs []coordtest.Cached) string {
		var parts []string
		for _, x := range cs {
			parts = append(parts, x.Instance+"@"+x.At.Sub(t0).String())
		}
		return strings.Join(parts, " ")
	}
	tests := []struct {
		m            *member
		want         string
		unknown      uint64
		wantBlocksI2 []uint64
	}{
		{a, "i2@1s", 0, []uint64{5, 6}},
		{b, "i0@0s i1@1s", 1, nil},
		{c, "i0@0s i1@1s i2@1s", 1, []uint64{5, 6}},
	}
	for _, tt := range tests {
		cs := tt.m.s.TakeCached()
		if got := render(cs); got != tt.want {
			t.Errorf("%s cached %q, want %q (own records skipped, each aged from its dispatch)", tt.m.c.Replica(), got, tt.want)
		}
		for _, x := range cs {
			if x.Instance == "i2" && !slices.Equal(x.Blocks, tt.wantBlocksI2) {
				t.Errorf("%s: i2 blocks %v, want %v", tt.m.c.Replica(), x.Blocks, tt.wantBlocksI2)
			}
		}
		if st := tt.m.c.Stats(); st.Unknown != tt.unknown {
			t.Errorf("%s: Stats().Unknown = %d, want %d", tt.m.c.Replica(), st.Unknown, tt.unknown)
		}
	}
	// Nothing is delivered twice.
	for _, m := range p.reps {
		_ = m.c.Receive(ctx)
		if cs := m.s.TakeCached(); len(cs) != 0 {
			t.Errorf("%s: second Receive applied %d records, want 0", m.c.Replica(), len(cs))
		}
	}
}

// With a delay, what a replica publishes reaches the others that much
// later (presence and load, key-depth table, dispatch batches), but leases
// are decided at once.
func TestHubDelay(t *testing.T) {
	const delay = 250 * time.Millisecond // under the 300ms presence TTL
	p := newPool(t, 2, delay)
	a, b := p.reps[0], p.reps[1]
	ctx := context.Background()
	a.s.SetLocal("i0", scheduler.Load{Queued: 2})
	a.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{8}})
	a.sync(t)
	a.link.Dispatched("i0", []uint64{1})
	a.link.Flush()
	b.sync(t)
	_ = b.c.Receive(ctx)
	if st := b.c.Stats(); st.Replicas != 0 || st.Applied != 0 || len(splits(b)) != 0 || b.s.Remote()["i0"].Queued != 0 {
		t.Fatalf("before the delay b sees: %+v, splits %v, remote %+v; want nothing", st, splits(b), b.s.Remote())
	}
	if !a.c.Stats().Leader || b.c.Stats().Leader {
		t.Fatal("the leader lease is not decided at once")
	}
	a.s.SetPlan(scheduler.Move{From: "i0", To: "i1"})
	b.s.SetPlan(scheduler.Move{From: "i0", To: "i2"})
	if a.c.Rebalance(ctx) != 1 || b.c.Rebalance(ctx) != 0 {
		t.Fatal("migration leases are not decided at once")
	}

	p.clock.Advance(delay - time.Millisecond)
	b.sync(t)
	if b.c.Stats().Replicas != 0 {
		t.Fatalf("b sees a %v after its beat, want only after %v", delay-time.Millisecond, delay)
	}
	p.clock.Advance(time.Millisecond)
	a.sync(t) // its earlier beat is still the one b can see
	b.sync(t)
	_ = b.c.Receive(ctx)
	if st := b.c.Stats(); st.Replicas != 1 || st.Applied != 1 || !slices.Equal(splits(b), []uint64{8}) || b.s.Remote()["i0"].Queued != 2 {
		t.Errorf("after the delay b sees: %+v, splits %v, remote %+v; want a, its record, its table, its load", st, splits(b), b.s.Remote())
	}
}

func TestNewInvalid(t *testing.T) {
	hub := coord.NewHub(coord.HubOptions{})
	s := coordtest.NewScheduler("i0")
	tests := []struct {
		name string
		t    coord.Transport
		s    coord.Scheduler
		o    coord.Options
	}{
		{"nil transport", nil, s, coord.Options{}},
		{"nil scheduler", hub.Join("a"), nil, coord.Options{}},
		{"heartbeat", hub.Join("b"), s, coord.Options{Heartbeat: time.Microsecond}},
		{"lease ttl", hub.Join("c"), s, coord.Options{LeaseTTL: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := coord.New(tt.t, tt.s, tt.o); !errors.Is(err, coord.ErrInvalidOptions) {
				t.Errorf("New() error = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

// A leader that loses the key-depth lease through failed syncs, while
// another replica leads and publishes, adopts that replica's table when it
// leads again: it does not republish its own, stale one. Pins Sync's
// error path forgetting the lead (wasLeader = false; kept, the returning
// leader skips the import and overwrites the pool's table with its own).
func TestLeaderRegainedAfterFailuresAdopts(t *testing.T) {
	p := newPool(t, 0, 0)
	f := &failing{Transport: p.hub.Join("lead")}
	lead := p.join(t, "lead", f)
	b := p.join(t, "b", p.hub.Join("b"))
	c := p.join(t, "c", p.hub.Join("c"))
	lead.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{1, 2}})
	for _, m := range []*member{lead, b, c} {
		m.sync(t)
	}
	if !lead.c.Stats().Leader {
		t.Fatal("the first replica to beat does not lead")
	}

	// The leader's transport fails for 4 heartbeats: its 3-heartbeat lease
	// runs out. Its own table moves on meanwhile.
	f.down = true
	for range 4 {
		p.clock.Advance(hb)
		if err := lead.c.Sync(context.Background()); !errors.Is(err, errDown) {
			t.Fatalf("Sync() with the transport down = %v, want errDown", err)
		}
	}
	lead.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{1, 2, 5}})

	// b takes over, adopts [1 2] (version 2), then publishes its own [7]
	// (version 3), which c imports.
	b.sync(t)
	if !b.c.Stats().Leader {
		t.Fatal("b does not lead once the old leader's lease expired")
	}
	b.s.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{7}})
	b.sync(t)
	c.sync(t)
	if got := splits(c); !slices.Equal(got, []uint64{7}) || c.c.Stats().KeyDepthVersion != 3 {
		t.Fatalf("c: splits %v version %d, want b's [7] version 3", got, c.c.Stats().KeyDepthVersion)
	}

	// b crashes; its lease runs out; the old leader's transport is back.
	p.clock.Advance(4 * hb)
	f.down = false
	lead.sync(t)
	if !lead.c.Stats().Leader {
		t.Fatal("the old leader does not lead again once b's lease expired")
	}
	if got := splits(lead); !slices.Equal(got, []uint64{7}) {
		t.Errorf("returning leader's splits %v, want the adopted [7] (not its stale [1 2 5])", got)
	}
	if got := lead.c.Stats().KeyDepthVersion; got != 4 {
		t.Errorf("returning leader's KeyDepthVersion = %d, want 4 (a new version of b's table)", got)
	}
	c.sync(t)
	if got := splits(c); !slices.Equal(got, []uint64{7}) {
		t.Errorf("c: splits %v after the old leader returned, want [7]: it republished its stale table", got)
	}
}
