package coord_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/coord/coordtest"
	"github.com/dualmap/dualmap/scheduler"
)

// A peer's claim beyond the scheduler's bounds is cut before it counts,
// then the sum of the peers' claims is; each cut is counted (per replica,
// the sum apart) and logged at most once a minute.
func TestRemoteLoadClamped(t *testing.T) {
	clock := coordtest.NewClock()
	hub := coord.NewHub(coord.HubOptions{Now: clock.Now})
	var logs bytes.Buffer
	me := coordtest.NewScheduler("i0", "i1")
	me.SetBound(scheduler.Load{Queued: 10, QueuedTokens: 1000, PendingTokens: 500, Running: 4})
	c, err := coord.New(hub.Join("me"), me, coord.Options{Heartbeat: hb, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	peer := func(name string, l scheduler.Load) *coord.Coordinator {
		s := coordtest.NewScheduler("i0", "i1")
		s.SetLocal("i0", l)
		pc, err := coord.New(hub.Join(name), s, coord.Options{Heartbeat: hb, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return pc
	}
	sync := func(cs ...*coord.Coordinator) {
		t.Helper()
		for _, x := range cs {
			if err := x.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	liar := peer("liar", scheduler.Load{Queued: 5000, QueuedTokens: 5000, PendingTokens: 5000, Running: 5000})
	honest := peer("honest", scheduler.Load{Running: 3, PendingTokens: 100})
	sync(liar, honest, c)
	if got, want := me.Remote()["i0"], (scheduler.Load{Queued: 10, QueuedTokens: 1000, PendingTokens: 500, Running: 4}); got != want {
		t.Errorf("remote i0 = %+v, want the bound %+v", got, want)
	}
	if got := me.Remote()["i1"]; got != (scheduler.Load{}) {
		t.Errorf("remote i1 = %+v, want zero (nobody reports)", got)
	}
	if got := me.Replicas(); got != 3 {
		t.Errorf("SetReplicas(%d), want 3 (two peers and this one)", got)
	}
	st := c.Stats()
	if fmt.Sprint(st.ClampedBy) != "map[liar:1]" || st.ClampedSums != 1 {
		t.Errorf("Stats() ClampedBy = %v, ClampedSums = %d; want map[liar:1], 1", st.ClampedBy, st.ClampedSums)
	}
	clock.Advance(hb)
	sync(liar, honest, c)
	if n := strings.Count(logs.String(), "load cut"); n != 1 {
		t.Errorf("%d clamp warnings after two clamped heartbeats, want 1 (at most one a minute):\n%s", n, logs.String())
	}
	if got := c.Stats().ClampedBy["liar"]; got != 2 {
		t.Errorf("ClampedBy[liar] = %d after two heartbeats, want 2", got)
	}

	// Claims within the bound count as they are.
	hub2 := coord.NewHub(coord.HubOptions{Now: clock.Now})
	me2 := coordtest.NewScheduler("i0")
	me2.SetBound(scheduler.Load{Queued: 10, QueuedTokens: 1000, PendingTokens: 500, Running: 4})
	c2, _ := coord.New(hub2.Join("me"), me2, coord.Options{Heartbeat: hb, Now: clock.Now})
	s3 := coordtest.NewScheduler("i0")
	s3.SetLocal("i0", scheduler.Load{Queued: 1, QueuedTokens: 20, PendingTokens: 30, Running: 2})
	c3, _ := coord.New(hub2.Join("ok"), s3, coord.Options{Heartbeat: hb, Now: clock.Now})
	sync(c3, c2)
	if got := me2.Remote()["i0"]; got != (scheduler.Load{Queued: 1, QueuedTokens: 20, PendingTokens: 30, Running: 2}) {
		t.Errorf("remote i0 = %+v, want the claim as it is", got)
	}
	if st := c2.Stats(); len(st.ClampedBy) != 0 || st.ClampedSums != 0 {
		t.Errorf("Stats() = %+v after claims within bounds, want no clamps", st)
	}
}

// The per-replica counts keep at most 32 names; the rest count as other.
func TestRemoteLoadClampLabelsBounded(t *testing.T) {
	clock := coordtest.NewClock()
	hub := coord.NewHub(coord.HubOptions{Now: clock.Now})
	me := coordtest.NewScheduler("i0")
	me.SetBound(scheduler.Load{Running: 1})
	c, _ := coord.New(hub.Join("me"), me, coord.Options{Heartbeat: hb, Now: clock.Now})
	var peers []*coord.Coordinator
	for i := range 40 {
		s := coordtest.NewScheduler("i0")
		s.SetLocal("i0", scheduler.Load{Running: 2})
		pc, _ := coord.New(hub.Join(fmt.Sprintf("r%02d", i)), s, coord.Options{Heartbeat: hb, Now: clock.Now})
		peers = append(peers, pc)
	}
	for _, pc := range append(peers, c) {
		if err := pc.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	total := uint64(0)
	for _, n := range st.ClampedBy {
		total += n
	}
	if len(st.ClampedBy) != 33 || st.ClampedBy["other"] != 8 || total != 40 {
		t.Errorf("ClampedBy has %d names (other %d, total %d), want 33 (32 and other), other 8, total 40", len(st.ClampedBy), st.ClampedBy["other"], total)
	}
}
