package sim

import (
	"slices"
	"testing"
	"time"
)

// simulated builds and runs a cluster as Simulate does and returns it.
func simulated(t *testing.T, qps float64, opt Options) *cluster {
	t.Helper()
	opt, err := opt.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{opt: opt, epoch: time.Unix(0, 0), index: map[string]int{}}
	if err := c.build(); err != nil {
		t.Fatal(err)
	}
	c.load(smallTrace(t, 1500), qps)
	c.run()
	return c
}

// The simulated replicas coordinate through the same code as serve's: each
// sees the others, one leads the key-depth table and the others follow it,
// dispatch records flow between them, and every migration goes through a
// lease on its source instance.
func TestReplicasCoordinate(t *testing.T) {
	const k = 3
	// A low hotspot threshold makes the hot prefixes migrate.
	o := Options{Instances: 4, Replicas: k, SyncInterval: 200 * time.Millisecond, Seed: 1}
	o.Scheduler.Rebalance.PendingTokens = 4096
	o.Scheduler.KeyDepth.Window, o.Scheduler.KeyDepth.SplitFactor = 200, 0.5 // and prefixes split
	c := simulated(t, 10, o)
	if len(c.coords) != k {
		t.Fatalf("%d coordinators, want %d", len(c.coords), k)
	}
	leaders := 0
	var granted, refused, moved, dispatched uint64
	for _, s := range c.reps {
		dispatched += s.Stats().Dispatched
	}
	for i, co := range c.coords {
		st := co.Stats()
		t.Logf("replica %d: %+v", i, st)
		if st.Leader {
			leaders++
		}
		if st.Replicas != k-1 {
			t.Errorf("replica %d sees %d others, want %d", i, st.Replicas, k-1)
		}
		// Every dispatch record of the others reaches it; 1% for records
		// coalesced or still in flight at the end.
		others := dispatched - c.reps[i].Stats().Dispatched
		if st.Applied > others || float64(st.Applied) < 0.99*float64(others) {
			t.Errorf("replica %d applied %d dispatch records, want the others' %d (-1%%)", i, st.Applied, others)
		}
		if st.KeyDepthVersion < 2 {
			t.Errorf("replica %d: key-depth version %d, want the table republished as it changed", i, st.KeyDepthVersion)
		}
		granted, refused, moved = granted+st.Granted, refused+st.Refused, moved+st.Moved
	}
	if leaders != 1 || !c.coords[0].Stats().Leader {
		t.Errorf("%d key-depth leaders, want 1: replica 0, the first to beat", leaders)
	}
	// What the leader publishes at a round the followers hold after the
	// next.
	c.exchange()
	want := c.reps[0].KeyDepthState().Splits
	if len(want) == 0 {
		t.Fatal("the leader holds no split: the test compares empty tables")
	}
	c.now += c.opt.SyncInterval.Seconds()
	c.exchange()
	for i, s := range c.reps {
		if got := s.KeyDepthState().Splits; !slices.Equal(got, want) {
			t.Errorf("replica %d key-depth splits %v, want the leader's %v", i, got, want)
		}
	}
	if moved == 0 || refused == 0 {
		t.Errorf("leases granted %d, refused %d, moves %d: want contention over hotspots, and moves", granted, refused, moved)
	}
	var migrations uint64
	for _, s := range c.reps {
		migrations += s.Stats().Migrations
	}
	if migrations != moved {
		t.Errorf("schedulers migrated %d requests, coordinators moved %d: rebalancing outside the leases", migrations, moved)
	}
}

// Independent replicas (SyncInterval 0) share nothing, leases included:
// each rebalances on its own in Tick.
func TestIndependentReplicasShareNothing(t *testing.T) {
	c := simulated(t, 6, Options{Instances: 4, Replicas: 3, Seed: 1})
	if c.hub != nil || c.coords != nil {
		t.Fatal("independent replicas are connected")
	}
	for i, s := range c.reps {
		if s.Config().Rebalance.External {
			t.Errorf("replica %d: Rebalance.External, want its own rebalancing in Tick", i)
		}
	}
}
