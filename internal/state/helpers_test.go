package state

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
	"github.com/redis/go-redis/v9"
)

// testPool is the pool every test replica routes over.
func testPool(n int) []scheduler.Instance {
	list := make([]scheduler.Instance, n)
	for i := range list {
		list[i] = scheduler.Instance{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)}
	}
	return list
}

// testPrompt returns n chained block hashes derived from seed.
func testPrompt(seed uint64, n int) []uint64 {
	b := make([]uint64, n)
	var h uint64
	for i := range b {
		h = scheduler.ChainHash(h, seed<<16|uint64(i))
		b[i] = h
	}
	return b
}

func testRequest(blocks []uint64) *scheduler.Request {
	return &scheduler.Request{Blocks: blocks, Tokens: len(blocks) * 512}
}

// replica is one in-process router replica: a real scheduler fed by a
// Coordinator over a RedisStore whose Run goroutine the test owns.
type replica struct {
	name   string
	store  *RedisStore
	sched  *scheduler.Scheduler
	coord  *coord.Coordinator
	cancel context.CancelFunc
	done   chan error
	// leaseTimeouts counts this replica's TryLease calls of a test's
	// lease race that Redis left unanswered (each one error in Stats).
	leaseTimeouts atomic.Uint64
}

// quietLogger discards the stores' logs (the tests kill Redis on
// purpose), unless DUALMAP_STATE_LOG=1 sends them to stderr at Debug.
func quietLogger() *slog.Logger {
	if os.Getenv("DUALMAP_STATE_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newReplica starts a replica named name on the Redis at addr. mod, if not
// nil, adjusts the options; hooks are added to the client before Run.
func newReplica(t testing.TB, addr, name string, mod func(*RedisOptions), hooks ...redis.Hook) *replica {
	t.Helper()
	return newReplicaOver(t, addr, name, mod, nil, hooks...)
}

// newReplicaOver is newReplica with the Coordinator running over
// wrap(store) rather than the store itself, when wrap is not nil (a
// replica of another version).
func newReplicaOver(t testing.TB, addr, name string, mod func(*RedisOptions), wrap func(*RedisStore) coord.Transport, hooks ...redis.Hook) *replica {
	t.Helper()
	sched, err := scheduler.New(scheduler.Config{Candidates: 2}, testPool(8))
	if err != nil {
		t.Fatalf("scheduler.New() error = %v", err)
	}
	opt := RedisOptions{Addrs: []string{addr}, Pool: "test", Replica: name, Logger: quietLogger()}
	if mod != nil {
		mod(&opt)
	}
	store, err := NewRedis(opt)
	if err != nil {
		t.Fatalf("NewRedis() error = %v", err)
	}
	for _, h := range hooks {
		store.rdb.AddHook(h)
	}
	var tr coord.Transport = store
	if wrap != nil {
		tr = wrap(store)
	}
	c, err := coord.New(tr, sched, coord.Options{})
	if err != nil {
		t.Fatalf("coord.New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, store: store, sched: sched, coord: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- store.Run(ctx, c) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run, checks it returned nil within loadedFloor, and closes the
// store. Idempotent.
func (r *replica) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: Run() = %v, want nil", r.name, err)
		}
	case <-time.After(loadedFloor):
		t.Errorf("%s: Run() did not return within %v of cancel", r.name, loadedFloor)
	}
	if err := r.store.Close(); err != nil {
		t.Errorf("%s: Close() = %v", r.name, err)
	}
}

// route routes a new request for blocks on r and shares the dispatch,
// as extproc does.
func (r *replica) route(t testing.TB, blocks []uint64) scheduler.Decision {
	t.Helper()
	req := testRequest(blocks)
	d, err := r.sched.Submit(req, nil)
	if err != nil {
		t.Fatalf("%s: Submit() error = %v", r.name, err)
	}
	if d.Queued {
		t.Fatalf("%s: Submit() queued the request; these tests route without a router queue", r.name)
	}
	r.store.Dispatched(d.Instance, req.Blocks)
	return d
}

// remote returns r's view of the other replicas' load, by instance.
func (r *replica) remote() map[string]scheduler.Load {
	m := map[string]scheduler.Load{}
	for _, in := range r.sched.Instances() {
		m[in.ID] = in.Remote
	}
	return m
}

// loadedFloor is the least eventually waits before it fails: expected
// bounds are quiet-machine figures, and a machine running the race suite
// beside other work stalls replicas and Redis for seconds.
const loadedFloor = 20 * time.Second

// eventually polls cond every 10ms until it returns "", and fails with
// cond's last message once neither expected (what a quiet machine takes,
// with room) nor loadedFloor has passed. A wait past expected is logged.
// It returns the time it took.
func eventually(t testing.TB, expected time.Duration, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	limit := max(expected, loadedFloor)
	for {
		msg := cond()
		if msg == "" {
			took := time.Since(start)
			if took > expected {
				t.Logf("took %v, over the expected %v (a loaded machine?)", took.Round(time.Millisecond), expected)
			}
			return took
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v: %s", limit, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// commandCounter is a go-redis hook counting the commands sent, a pipeline
// counting as its length.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// leaderOf returns the replica holding the key-depth lease, once exactly
// one does.
func leaderOf(t testing.TB, rs []*replica) *replica {
	t.Helper()
	var leader *replica
	eventually(t, 10*time.Second, func() string { // a few heartbeats; the bound is for a loaded machine
		leader = nil
		n := 0
		for _, r := range rs {
			if r.coord.Stats().Leader {
				leader = r
				n++
			}
		}
		if n != 1 {
			return fmt.Sprintf("%d replicas hold the key-depth lease, want 1", n)
		}
		return ""
	})
	return leader
}
