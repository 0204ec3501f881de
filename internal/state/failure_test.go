package state

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// TestReplicaLeaves: the others stop counting a replica's load at once
// when it stops cleanly, and within 3 heartbeats when it is killed (its
// heartbeats just stop).
func TestReplicaLeaves(t *testing.T) {
	const hb = 100 * time.Millisecond
	tests := []struct {
		name   string
		killed bool
		within time.Duration
	}{
		{"clean stop", false, hb + 500*time.Millisecond},
		{"killed", true, 3*hb + hb + 500*time.Millisecond}, // expiry, one heartbeat to notice, slack
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, _, _ := startRedis(t)
			rs := startReplicas(t, addr, 3)
			gone := rs[2]
			d := gone.route(t, testPrompt(7, 4))
			for _, r := range rs[:2] {
				eventually(t, time.Second, func() string {
					if got := r.remote()[d.Instance]; got.Running != 1 {
						return fmt.Sprintf("%s: Remote[%s] = %+v, want Running 1", r.name, d.Instance, got)
					}
					return ""
				})
			}
			gone.store.skipLeave = tt.killed
			gone.stop(t)
			stopped := time.Now()
			for _, r := range rs[:2] {
				eventually(t, 2*time.Second, func() string {
					if got := r.remote()[d.Instance]; got.Running != 0 {
						return fmt.Sprintf("%s: Remote[%s] = %+v, want zero once %s left", r.name, d.Instance, got, gone.name)
					}
					return ""
				})
			}
			took := time.Since(stopped)
			t.Logf("%s's load gone from the others after %v", gone.name, took.Round(time.Millisecond))
			if took > tt.within {
				t.Errorf("load of a %s replica lingered %v, want <= %v", tt.name, took, tt.within)
			}
			for _, r := range rs[:2] {
				eventually(t, time.Second, func() string {
					if got := r.coord.Stats().Replicas; got != 1 {
						return fmt.Sprintf("%s: coord Stats().Replicas = %d, want 1", r.name, got)
					}
					return ""
				})
			}
		})
	}
}

// publishFailures is how many publications of s failed in a row (reset
// by a success).
func publishFailures(s *RedisStore) int {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.failing["publish"]
}

// TestRedisRestart kills Redis, keeps the replicas busy through the
// outage, starts an empty Redis on the same port and checks that agreement
// comes back.
func TestRedisRestart(t *testing.T) {
	addr, stop, restart := startRedis(t)
	rs := startReplicas(t, addr, 2)
	a, b := rs[0], rs[1]
	d := a.route(t, testPrompt(1, 4))
	// The bounds of the waits below are for a loaded machine: each is a
	// precondition reached within a few heartbeats (100 ms) on a quiet one.
	eventually(t, 10*time.Second, func() string {
		if got := b.remote()[d.Instance]; got.Running != 1 {
			return fmt.Sprintf("b: Remote[%s] = %+v, want Running 1", d.Instance, got)
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string { // the record of d is out, so what is buffered below is the outage's
		if st := a.store.Stats(); st.Published != 1 || st.Buffered != 0 {
			return fmt.Sprintf("a: Stats() Published %d, Buffered %d, want 1 and 0", st.Published, st.Buffered)
		}
		return ""
	})

	stop()
	down := time.Now()
	for _, r := range rs {
		eventually(t, 10*time.Second, func() string {
			if st := r.store.Stats(); st.Up || st.Outages != 1 || st.DownSince.IsZero() {
				return fmt.Sprintf("%s: Stats() Up=%v Outages=%d DownSince=%v, want down in outage 1", r.name, st.Up, st.Outages, st.DownSince)
			}
			return ""
		})
	}
	// Remote load is cleared rather than kept stale.
	eventually(t, 10*time.Second, func() string {
		if got := b.remote()[d.Instance]; got.Running != 0 {
			return fmt.Sprintf("b: Remote[%s] = %+v during the outage, want zero", d.Instance, got)
		}
		return ""
	})
	t.Logf("outage seen and remote load cleared %v after Redis died", time.Since(down).Round(time.Millisecond))
	// Routing and Dispatched go on; nothing blocks.
	var prompts [][]uint64
	var decs []scheduler.Decision
	start := time.Now()
	for i := range 2000 {
		p := testPrompt(uint64(10_000+i), 8)
		prompts = append(prompts, p)
		decs = append(decs, a.route(t, p))
	}
	// Nothing waits on Redis: a route that waited for the store (a
	// retry's backoff, 50 ms at least; an operation's timeout, 1 s) would
	// make the 2000 take at least 2000 x 50 ms = 100 s. The bound is a
	// quarter of that, whatever the machine's load (a quiet one takes tens
	// of milliseconds, a loaded one under -race a few seconds); the cost
	// of Dispatched itself is BenchmarkDispatched's.
	el := time.Since(start)
	t.Logf("2000 routes with Dispatched during the outage took %v", el.Round(time.Millisecond))
	if limit := 2000 * backoffMin / 4; el > limit {
		t.Errorf("2000 routes with Dispatched during the outage took %v, want under %v: something waits on Redis", el, limit)
	}
	// Every record is kept, in the buffer or pending publication (the
	// prompts are distinct: nothing coalesces; the bound is far above).
	if st := a.store.Stats(); st.Buffered != 2000 {
		t.Errorf("a: Stats().Buffered = %d during the outage, want the 2000 records kept", st.Buffered)
	}
	// Kept through failed publications: two attempts that failed after
	// the routes (the second began after the first failed, so it took
	// every record the routes buffered), not a sleep that may see none
	// on a loaded machine.
	f0 := publishFailures(a.store)
	eventually(t, 30*time.Second, func() string {
		if f := publishFailures(a.store); f < f0+2 {
			return fmt.Sprintf("a: %d failed publications since the routes, want 2", f-f0)
		}
		return ""
	})
	if st := a.store.Stats(); st.Buffered != 2000 || st.Dropped != 0 || st.Published != 1 {
		t.Errorf("a: Stats() Buffered = %d, Dropped = %d, Published = %d after two failed publications, want 2000 kept, none dropped, only the first record published", st.Buffered, st.Dropped, st.Published)
	}
	if n := a.store.pub.waiting.Load(); n != 2000 {
		t.Errorf("a: %d records pending publication after two failed attempts, want all 2000 taken from the buffer and kept", n)
	}
	for _, r := range rs {
		select {
		case err := <-r.done:
			t.Fatalf("%s: Run() returned %v during the outage", r.name, err)
		default:
		}
	}

	restart()
	up := time.Now()
	eventually(t, 10*time.Second, func() string {
		for _, r := range rs {
			if st := r.store.Stats(); !st.Up {
				return fmt.Sprintf("%s: Stats().Up = false after the restart", r.name)
			}
		}
		return ""
	})
	// The first replica to heartbeat after the restart leads; its table
	// is the pool's from then on.
	splits := []uint64{3, 5}
	leader := leaderOf(t, rs)
	leader.sched.ImportKeyDepth(scheduler.KeyDepthState{Splits: splits})
	eventually(t, 10*time.Second, func() string {
		for _, r := range rs {
			if got := r.sched.KeyDepthState().Splits; !slices.Equal(got, splits) {
				return fmt.Sprintf("%s: KeyDepthState().Splits = %v, want %v", r.name, got, splits)
			}
		}
		if got := b.remote()[d.Instance]; got.Running < 1 {
			return fmt.Sprintf("b: Remote[%s] = %+v after the restart, want a's load back", d.Instance, got)
		}
		for i, p := range prompts {
			got, err := b.sched.Pick(testRequest(p))
			if err != nil || got.Instance != decs[i].Instance || got.CachedTokens == 0 {
				return fmt.Sprintf("b: Pick(prompt %d routed on a during the outage) = %s, %d cached, %v; want %s with > 0 cached", i, got.Instance, got.CachedTokens, err, decs[i].Instance)
			}
		}
		return ""
	})
	t.Logf("agreement back %v after the restart", time.Since(up).Round(time.Millisecond))
	p := testPrompt(99, 8)
	dp := a.route(t, p)
	eventually(t, 10*time.Second, func() string {
		if got, _ := b.sched.Pick(testRequest(p)); got.Instance != dp.Instance || got.CachedTokens == 0 {
			return fmt.Sprintf("b: Pick(new prompt) = %s with %d cached, want %s with > 0", got.Instance, got.CachedTokens, dp.Instance)
		}
		return ""
	})
	for _, r := range rs {
		st := r.store.Stats()
		t.Logf("%s: %+v", r.name, st)
		if st.Outages != 1 || st.Dropped != 0 {
			t.Errorf("%s: Stats() Outages=%d Dropped=%d, want 1 outage and nothing dropped", r.name, st.Outages, st.Dropped)
		}
	}
}
