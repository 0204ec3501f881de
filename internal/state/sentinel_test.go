package state

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelMaster is the name the test Sentinels monitor the primary by.
const sentinelMaster = "dualmap-test"

// sentinelSetup is a primary, one replica of it, and three Sentinels
// monitoring it.
type sentinelSetup struct {
	primary, replica *redisNode
	sentinels        []*redisNode
	clients          []*redis.SentinelClient // one per Sentinel
}

// startSentinels starts a primary, a replica of it and three Sentinels
// (redis-server --sentinel) monitoring it with quorum 2, down after 500ms
// without a reply, and returns once the replica is in sync and every
// Sentinel knows the replica and the two other Sentinels, so a failover
// can happen.
func startSentinels(t *testing.T) *sentinelSetup {
	t.Helper()
	s := &sentinelSetup{}
	s.primary = startNode(t, "primary", func() string { return "" })
	s.replica = startNode(t, "replica", func() string {
		return fmt.Sprintf("replicaof 127.0.0.1 %s\n", s.primary.port())
	})
	for i := range 3 {
		nd := startNode(t, fmt.Sprintf("sentinel %d", i), func() string {
			return fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\n"+
				"sentinel down-after-milliseconds %[1]s 500\n"+
				"sentinel failover-timeout %[1]s 2000\n", sentinelMaster, s.primary.port())
		}, "--sentinel")
		c := redis.NewSentinelClient(&redis.Options{Addr: nd.addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		t.Cleanup(func() { _ = c.Close() })
		s.sentinels = append(s.sentinels, nd)
		s.clients = append(s.clients, c)
	}
	took := waitFor(t, 15*time.Second, func(ctx context.Context) string {
		info, err := s.replica.rdb.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Sprintf("replica: INFO replication = %q, %v; want master_link_status:up", info, err)
		}
		for i, c := range s.clients {
			others, err := c.Sentinels(ctx, sentinelMaster).Result()
			if err != nil || len(others) != 2 {
				return fmt.Sprintf("sentinel %d: SENTINEL SENTINELS = %d, %v; want 2", i, len(others), err)
			}
			replicas, err := c.Replicas(ctx, sentinelMaster).Result()
			if err != nil || len(replicas) != 1 || replicas[0]["flags"] != "slave" {
				return fmt.Sprintf("sentinel %d: SENTINEL REPLICAS = %v, %v; want the replica, up", i, replicas, err)
			}
		}
		return ""
	})
	t.Logf("primary %s, replica %s, 3 Sentinels ready after %v", s.primary.addr, s.replica.addr, took.Round(time.Millisecond))
	return s
}

// addrs returns the Sentinels' addresses.
func (s *sentinelSetup) addrs() []string {
	a := make([]string, len(s.sentinels))
	for i, nd := range s.sentinels {
		a[i] = nd.addr
	}
	return a
}

// masters returns what each Sentinel says the primary is, "" for an error.
func (s *sentinelSetup) masters(ctx context.Context) []string {
	m := make([]string, len(s.clients))
	for i, c := range s.clients {
		if hp, err := c.GetMasterAddrByName(ctx, sentinelMaster).Result(); err == nil && len(hp) == 2 {
			m[i] = hp[0] + ":" + hp[1]
		}
	}
	return m
}

// router routes requests on a set of replicas from its own goroutine, as
// fast as it can with a 1ms pause, counting them by phase, and records
// every Submit or Pick that failed.
type router struct {
	phase  atomic.Int32
	counts [3]atomic.Int64 // requests routed, by phase
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards errors and maxGap
	errors []string
	maxGap time.Duration
}

func startRouter(rs []*replica) *router {
	ctx, cancel := context.WithCancel(context.Background())
	ro := &router{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ro.done)
		last := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			r, other := rs[i%len(rs)], rs[(i+1)%len(rs)]
			req := testRequest(testPrompt(1<<30|uint64(i%256), 4))
			d, err := r.sched.Submit(req, nil)
			switch {
			case err != nil:
				ro.fail("%s: Submit() error = %v", r.name, err)
			case d.Queued:
				ro.fail("%s: Submit() queued the request", r.name)
			default:
				r.store.Dispatched(d.Instance, req.Blocks)
				r.sched.Complete(req)
			}
			if _, err := other.sched.Pick(testRequest(req.Blocks)); err != nil {
				ro.fail("%s: Pick() error = %v", other.name, err)
			}
			ro.counts[ro.phase.Load()].Add(1)
			now := time.Now()
			ro.mu.Lock()
			ro.maxGap = max(ro.maxGap, now.Sub(last))
			ro.mu.Unlock()
			last = now
			time.Sleep(time.Millisecond)
		}
	}()
	return ro
}

func (ro *router) fail(format string, args ...any) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	ro.errors = append(ro.errors, fmt.Sprintf(format, args...))
}

// stop ends the goroutine and waits for it. Idempotent.
func (ro *router) stop() {
	ro.cancel()
	<-ro.done
}

// TestRedisSentinelFailover runs three replicas through Sentinel, checks
// that they agree, then kills the primary (SIGKILL) while a goroutine keeps
// routing on every replica. Sentinel promotes the replica; routing must
// not fail or pause at any time, and the replicas must agree again after
// the failover.
func TestRedisSentinelFailover(t *testing.T) {
	s := startSentinels(t)
	rs := make([]*replica, 3)
	for i := range rs {
		rs[i] = newReplica(t, "", fmt.Sprintf("r%d", i), func(o *RedisOptions) {
			o.Addrs = s.addrs()
			o.MasterName = sentinelMaster
		})
	}
	t.Run("before the failover", func(t *testing.T) {
		checkAgreement(t, rs, 1)
		checkNoOutage(t, rs)
	})
	if t.Failed() {
		return
	}

	ro := startRouter(rs)
	t.Cleanup(ro.stop) // if a check below fails first
	time.Sleep(200 * time.Millisecond)
	ro.phase.Store(1)
	s.primary.kill()
	killed := time.Now()
	took := waitFor(t, 15*time.Second, func(ctx context.Context) string {
		for i, m := range s.masters(ctx) {
			if m != s.replica.addr {
				return fmt.Sprintf("sentinel %d: SENTINEL GET-MASTER-ADDR-BY-NAME = %q, want the replica %s", i, m, s.replica.addr)
			}
		}
		return ""
	})
	ro.phase.Store(2)
	t.Logf("primary killed; every Sentinel names the replica %s after %v", s.replica.addr, took.Round(time.Millisecond))

	// Agreement comes back: a new dispatch on each replica becomes cached
	// on the others.
	for i, src := range rs {
		p := testPrompt(2<<20|uint64(i), 8)
		d := src.route(t, p)
		for _, dst := range rs {
			if dst == src {
				continue
			}
			took := eventually(t, 10*time.Second, func() string {
				got, err := dst.sched.Pick(testRequest(p))
				if err != nil || got.Instance != d.Instance || got.CachedTokens == 0 {
					return fmt.Sprintf("%s: Pick() = %s with %d cached tokens, %v; want %s with > 0 (routed on %s after the failover)", dst.name, got.Instance, got.CachedTokens, err, d.Instance, src.name)
				}
				return ""
			})
			t.Logf("%s -> %s: dispatch visible %v after the failover", src.name, dst.name, took.Round(time.Millisecond))
		}
	}
	ro.stop()
	t.Logf("routed %d requests before the kill, %d until the failover, %d after; longest pause %v; %v from the kill to agreement",
		ro.counts[0].Load(), ro.counts[1].Load(), ro.counts[2].Load(), ro.maxGap.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if len(ro.errors) > 0 {
		t.Errorf("routing failed %d times during the failover, want 0; first: %s", len(ro.errors), ro.errors[0])
	}
	if ro.maxGap >= opTimeout {
		t.Errorf("routing paused for %v, want < %v (a Redis timeout: routing waited on Redis)", ro.maxGap, opTimeout)
	}
	for phase, name := range []string{"before the kill", "between the kill and the failover", "after the failover"} {
		if ro.counts[phase].Load() == 0 {
			t.Errorf("no request routed %s, want routing never to stop", name)
		}
	}
	// Everything agrees again, with fresh prompts and a fresh lease.
	t.Run("after the failover", func(t *testing.T) { checkAgreement(t, rs, 2) })
	for _, r := range rs {
		st := r.store.Stats()
		t.Logf("%s after the failover: %+v %+v", r.name, st, r.coord.Stats())
		if !st.Up {
			t.Errorf("%s: Stats().Up = false after the failover, want true", r.name)
		}
	}
}
