package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
)

// startReplicas starts n replicas r0..r(n-1) on one Redis.
func startReplicas(t *testing.T, addr string, n int) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		rs[i] = newReplica(t, addr, fmt.Sprintf("r%d", i), nil)
	}
	return rs
}

func TestReplicasAgree(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d replicas", n), func(t *testing.T) {
			addr, _, _ := startRedis(t)
			rs := startReplicas(t, addr, n)
			checkAgreement(t, rs, 1)
			checkNoOutage(t, rs)
		})
	}
}

// agreeWithin bounds how long checkAgreement waits for each fact to
// propagate; the replicas flush every 10ms and heartbeat every 100ms.
const agreeWithin = 2 * time.Second

// checkAgreement asserts that the replicas rs, running on one pool, agree:
// a dispatch on any of them becomes a cached prefix on every other, each
// sees the sum of the others' loads, exactly one holds the key-depth lease
// and the others follow its table, and a migration lease goes to exactly
// one. Prompts, splits and the leased instance derive from seed: call it
// again with another seed to check agreement anew on the same replicas.
func checkAgreement(t *testing.T, rs []*replica, seed uint64) {
	t.Helper()
	n := len(rs)
	t.Run("kv index", func(t *testing.T) {
		for i, src := range rs {
			p := testPrompt(seed<<20|uint64(100+i), 12)
			d := src.route(t, p)
			for _, dst := range rs {
				if dst == src {
					continue
				}
				took := eventually(t, agreeWithin, func() string {
					got, err := dst.sched.Pick(testRequest(p))
					if err != nil {
						return fmt.Sprintf("%s: Pick() error = %v", dst.name, err)
					}
					if got.Instance != d.Instance || got.CachedTokens == 0 {
						return fmt.Sprintf("%s: Pick() = %s with %d cached tokens, want %s with > 0 (routed on %s)", dst.name, got.Instance, got.CachedTokens, d.Instance, src.name)
					}
					return ""
				})
				t.Logf("%s -> %s: dispatch visible after %v", src.name, dst.name, took.Round(time.Millisecond))
			}
		}
	})

	t.Run("load", func(t *testing.T) {
		for i, r := range rs {
			for k := range 3 * (i + 1) {
				r.route(t, testPrompt(seed<<20|uint64(1000*(i+1)+k), 4))
			}
		}
		local := make([]map[string]scheduler.Load, n)
		for i, r := range rs {
			local[i] = map[string]scheduler.Load{}
			r.sched.LocalLoad(local[i])
		}
		for i, r := range rs {
			want := map[string]scheduler.Load{}
			for j := range rs {
				if j == i {
					continue
				}
				for id, l := range local[j] {
					w := want[id]
					w.Running += l.Running
					w.PendingTokens += l.PendingTokens
					want[id] = w
				}
			}
			eventually(t, agreeWithin, func() string {
				got := r.remote()
				for id, w := range want {
					if g := got[id]; g.Running != w.Running || g.PendingTokens != w.PendingTokens {
						return fmt.Sprintf("%s: Instances()[%s].Remote = %+v, want Running %d PendingTokens %d", r.name, id, g, w.Running, w.PendingTokens)
					}
				}
				return ""
			})
			if got, want := r.coord.Stats().Replicas, n-1; got != want {
				t.Errorf("%s: coord Stats().Replicas = %d, want %d", r.name, got, want)
			}
		}
	})

	t.Run("key depth", func(t *testing.T) {
		leader := leaderOf(t, rs)
		splits := []uint64{7, seed<<20 | 42, 1 << 60}
		leader.sched.ImportKeyDepth(scheduler.KeyDepthState{Splits: splits})
		for _, r := range rs {
			eventually(t, agreeWithin, func() string {
				if got := r.sched.KeyDepthState().Splits; !slices.Equal(got, splits) {
					return fmt.Sprintf("%s: KeyDepthState().Splits = %v, want %v (leader %s)", r.name, got, splits, leader.name)
				}
				return ""
			})
		}
		// A follower's own drift is undone by the next import.
		for _, r := range rs {
			if r != leader {
				r.sched.ImportKeyDepth(scheduler.KeyDepthState{Splits: []uint64{1}})
				eventually(t, agreeWithin, func() string {
					if got := r.sched.KeyDepthState().Splits; !slices.Equal(got, splits) {
						return fmt.Sprintf("%s after drift: KeyDepthState().Splits = %v, want %v", r.name, got, splits)
					}
					return ""
				})
			}
		}
	})

	t.Run("migration lease", func(t *testing.T) {
		const ttl = 10 * time.Second // longer than the test: nobody may take it over
		// The race is judged only when all n calls were answered: a call
		// Redis did not answer within LeaseTimeout (a loaded machine) may
		// or may not hold the lease, so the race is run again on another
		// instance, up to 5 times, and the unanswered calls are not counted
		// as Redis errors by checkNoOutage.
		type result struct {
			r   *replica
			won bool
			err error
		}
		var inst, holder string
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				t.Fatalf("TryLease from %d replicas at once: some call unanswered in each of 5 attempts", n)
			}
			inst = testPool(8)[(seed+uint64(attempt))%8].ID
			res := make(chan result, n)
			for _, r := range rs {
				go func() {
					ok, err := r.store.TryLease(context.Background(), inst, ttl)
					res <- result{r, ok, err}
				}()
			}
			holder = ""
			unanswered := false
			for range rs {
				x := <-res
				switch {
				case errors.Is(x.err, ErrUnavailable) && timedOut(x.err):
					unanswered = true
					x.r.leaseTimeouts.Add(1)
					t.Logf("%s: TryLease(%s) unanswered within %v: %v", x.r.name, inst, LeaseTimeout, x.err)
				case x.err != nil:
					t.Errorf("%s: TryLease(%s) error = %v", x.r.name, inst, x.err)
				case x.won && holder != "":
					t.Fatalf("TryLease(%s) from %d replicas at once: %s and %s both won, want exactly one", inst, n, holder, x.r.name)
				case x.won:
					holder = x.r.name
				}
			}
			if !unanswered {
				break
			}
		}
		if holder == "" {
			t.Fatalf("TryLease(%s) from %d replicas at once: nobody won, want exactly one", inst, n)
		}
		for _, r := range rs {
			got, err := r.store.TryLease(context.Background(), inst, ttl)
			if want := r.name == holder; err != nil || got != want {
				t.Errorf("%s: TryLease(%s) again = %v, %v; want %v, nil (held by %s)", r.name, inst, got, err, want, holder)
			}
		}
	})
}

// timedOut reports whether err is a deadline passing (the call's context,
// or a connection's read or write deadline set from it).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// checkNoOutage asserts that every replica's store is up and never saw an
// outage or a Redis error.
func checkNoOutage(t *testing.T, rs []*replica) {
	t.Helper()
	for _, r := range rs {
		st := r.store.Stats()
		t.Logf("%s: %+v %+v", r.name, st, r.coord.Stats())
		// A lease call left unanswered on a loaded machine (see
		// checkAgreement's migration lease) is the one error allowed.
		if lt := r.leaseTimeouts.Load(); !st.Up || st.Outages != 0 || st.Errors != lt {
			t.Errorf("%s: Stats() Up=%v Outages=%d Errors=%d, want up with no outage or error (but %d unanswered lease calls)", r.name, st.Up, st.Outages, st.Errors, lt)
		}
	}
}

// TestLeaderFailover: when the key-depth leader dies without cleaning up,
// another replica takes the lease after it expires and keeps publishing.
func TestLeaderFailover(t *testing.T) {
	addr, _, _ := startRedis(t)
	rs := startReplicas(t, addr, 3)
	old := leaderOf(t, rs)
	old.store.skipLeave = true
	old.stop(t)
	var rest []*replica
	for _, r := range rs {
		if r != old {
			rest = append(rest, r)
		}
	}
	start := time.Now()
	leader := leaderOf(t, rest)
	t.Logf("leader %s died; %s took over after %v", old.name, leader.name, time.Since(start).Round(time.Millisecond))
	splits := []uint64{99}
	leader.sched.ImportKeyDepth(scheduler.KeyDepthState{Splits: splits})
	for _, r := range rest {
		eventually(t, time.Second, func() string {
			if got := r.sched.KeyDepthState().Splits; !slices.Equal(got, splits) {
				return fmt.Sprintf("%s: KeyDepthState().Splits = %v, want %v", r.name, got, splits)
			}
			return ""
		})
	}
}

// TestWarmStart: a replica that starts late reads the stream from the
// beginning, and the backlog does not count as propagation delay.
func TestWarmStart(t *testing.T) {
	addr, _, _ := startRedis(t)
	a := newReplica(t, addr, "a", nil)
	var ds []scheduler.Decision
	var ps [][]uint64
	for i := range 20 {
		p := testPrompt(uint64(500+i), 6)
		ps = append(ps, p)
		ds = append(ds, a.route(t, p))
	}
	eventually(t, time.Second, func() string {
		if st := a.store.Stats(); st.Published != 20 {
			return fmt.Sprintf("a: Stats().Published = %d, want 20", st.Published)
		}
		return ""
	})
	time.Sleep(20 * time.Millisecond)
	b := newReplica(t, addr, "b", nil)
	eventually(t, time.Second, func() string {
		if st := b.coord.Stats(); st.Applied != 20 {
			return fmt.Sprintf("b: coord Stats().Applied = %d, want 20", st.Applied)
		}
		return ""
	})
	for i, p := range ps {
		got, err := b.sched.Pick(testRequest(p))
		if err != nil || got.Instance != ds[i].Instance || got.CachedTokens == 0 {
			t.Errorf("b: Pick(prompt %d) = %s, %d cached, %v; want %s with > 0 cached", i, got.Instance, got.CachedTokens, err, ds[i].Instance)
		}
	}
	if st := b.store.Stats(); st.PropagationP99 != 0 {
		t.Errorf("b: Stats().PropagationP99 = %v after reading only backlog, want 0", st.PropagationP99)
	}
}

// TestNewLeaderAdoptsTable: a replica that starts after the leader died
// takes the lease and carries on with the pool's table, not its own empty
// one.
func TestNewLeaderAdoptsTable(t *testing.T) {
	addr, _, _ := startRedis(t)
	a := newReplica(t, addr, "a", nil)
	splits := []uint64{11, 12}
	a.sched.ImportKeyDepth(scheduler.KeyDepthState{Splits: splits})
	eventually(t, time.Second, func() string {
		raw, err := a.store.rdb.Get(t.Context(), a.store.keys.keyDepth).Result()
		if err != nil {
			return fmt.Sprintf("GET %s: %v", a.store.keys.keyDepth, err)
		}
		kd, err := decodeKeyDepth(raw)
		if err != nil || kd.Leader != "a" || !slices.Equal(kd.Splits, splits) {
			return fmt.Sprintf("published key depth = %v, %v; want a's %v", kd, err, splits)
		}
		return ""
	})
	a.store.skipLeave = true
	a.stop(t)
	time.Sleep(3*coord.DefaultHeartbeat + 50*time.Millisecond) // the lease expires
	b := newReplica(t, addr, "b", nil)
	leaderOf(t, []*replica{b})
	c := newReplica(t, addr, "c", nil)
	for _, r := range []*replica{b, c} {
		eventually(t, time.Second, func() string {
			if got := r.sched.KeyDepthState().Splits; !slices.Equal(got, splits) {
				return fmt.Sprintf("%s: KeyDepthState().Splits = %v, want %v", r.name, got, splits)
			}
			return ""
		})
	}
}
