package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/proto/statepb"
	"github.com/dualmap/dualmap/scheduler"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

// TestHostileValues plants what an intruder with write access to Redis
// could: a fake leader's 40 MB key-depth table, then an oversized unsorted
// one; a fake replica's "full" load hash without an expiry, and one with
// an expiry but absurd values; a heartbeat scored an hour ahead; stream
// entries stamped in the future and before 1970. The replica stays up,
// allocates next to nothing, its remote loads stay within the bounds, its
// propagation figures stay sane, and the counters say what was refused.
func TestHostileValues(t *testing.T) {
	addr, _, _ := startRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	k := newKeys(DefaultPrefix, "test")
	pool := testPool(8)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A fake leader holds the lease, so the replica imports T:kd.
	must(rdb.Set(ctx, k.leader, "mallory", time.Hour).Err())
	huge := make([]byte, 40<<20)
	for i := range huge {
		huge[i] = byte(i)
	}
	must(rdb.Set(ctx, k.keyDepth, huge, 0).Err())
	huge = nil
	now, err := rdb.Time(ctx).Result()
	must(err)
	full := encodeRaw(1<<62, 1<<62, 1<<62, 1<<62)
	for _, id := range []string{"mallory", "eve"} {
		fields := []any{presenceField, "100"}
		for _, in := range pool {
			fields = append(fields, in.ID, full)
		}
		must(rdb.HSet(ctx, k.load(id), fields...).Err())
		must(rdb.ZAdd(ctx, k.replicas, redis.Z{Score: float64(now.UnixMilli()), Member: id}).Err())
	}
	must(rdb.PExpire(ctx, k.load("eve"), time.Hour).Err()) // eve has an expiry: read, clamped
	must(rdb.HSet(ctx, k.load("ghost"), presenceField, "100", pool[0].ID, full).Err())
	must(rdb.PExpire(ctx, k.load("ghost"), time.Hour).Err())
	must(rdb.ZAdd(ctx, k.replicas, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: "ghost"}).Err())
	for _, stamp := range []int64{time.Now().Add(24 * time.Hour * 365 * 200).UnixNano(), -1 << 62} {
		b, err := proto.Marshal(&statepb.DispatchBatch{Replica: "mallory", UnixNanos: stamp, Dispatches: []*statepb.Dispatch{{Instance: pool[1].ID, Blocks: testPrompt(uint64(stamp), 4)}}})
		must(err)
		must(rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.stream, Values: []any{"r", "mallory", "d", b}}).Err())
	}

	// The fake replicas keep heartbeating (with Redis's clock).
	beatCtx, stopBeats := context.WithCancel(ctx)
	beats := make(chan struct{})
	defer func() { stopBeats(); <-beats }()
	go func() {
		defer close(beats)
		for beatCtx.Err() == nil {
			if now, err := rdb.Time(beatCtx).Result(); err == nil {
				for _, id := range []string{"mallory", "eve"} {
					rdb.ZAdd(beatCtx, k.replicas, redis.Z{Score: float64(now.UnixMilli()), Member: id})
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	runtime.GC()
	before := totalAlloc()
	const maxReqs, maxTokens = 1000, 1 << 20
	r := newReplica(t, addr, "victim", func(o *RedisOptions) {
		o.MaxSplits, o.MaxLoadRequests, o.MaxLoadTokens = 100, maxReqs, maxTokens
	})
	eventually(t, 5*time.Second, func() string {
		st := r.store.Stats()
		switch {
		case !st.Up || st.Oversized == 0 || st.Ignored < 2 || st.Clamped == 0 || st.BadClock < 2:
			return fmt.Sprintf("Stats() = %+v, want up, Oversized > 0, Ignored >= 2 (mallory's hash, ghost's score), Clamped > 0 (eve), BadClock = 2", st)
		case r.coord.Stats().Replicas != 1:
			return fmt.Sprintf("coord Stats().Replicas = %d, want 1 (eve)", r.coord.Stats().Replicas)
		}
		return ""
	})
	time.Sleep(300 * time.Millisecond) // a few more heartbeats
	st := r.store.Stats()
	if !st.Up || st.Outages != 0 || st.Panics != 0 || st.RefusedReplies != 0 {
		t.Errorf("Stats() = %+v, want up all along, no panic, no reply refused", st)
	}
	if st.PropagationLast < 0 || st.PropagationP99 < 0 || st.PropagationP99 > time.Second {
		t.Errorf("propagation last %v, p99 %v; want within [0, 1s]", st.PropagationLast, st.PropagationP99)
	}
	bounds := map[string]scheduler.Load{}
	r.sched.RemoteBounds(bounds)
	for id, l := range r.remote() {
		// eve alone counts: ghost is dropped, mallory has no expiry; her
		// load is clamped here, then to what the instance can hold
		// (package coord).
		want, _ := scheduler.Load{Queued: maxReqs, QueuedTokens: maxTokens, PendingTokens: maxTokens, Running: maxReqs}.Clamp(bounds[id])
		if l != want {
			t.Errorf("remote load of %s = %+v, want %+v", id, l, want)
		}
	}
	if n, _ := rdb.ZScore(ctx, k.replicas, "ghost").Result(); n != 0 {
		t.Errorf("ghost still scored %v in %s, want dropped", n, k.replicas)
	}
	if kd := r.sched.KeyDepthState(); len(kd.Splits) != 0 {
		t.Errorf("imported %d splits from the 40 MB table, want none", len(kd.Splits))
	}
	r.route(t, testPrompt(1, 8))
	if grew := totalAlloc() - before; grew > 16<<20 {
		t.Errorf("allocated %d MiB next to a 40 MB key-depth table, want under 16 MiB", grew>>20)
	}

	// An unsorted table with duplicates, above MaxSplits: imported sorted,
	// deduplicated and cut.
	splits := make([]uint64, 0, 300)
	for range 150 {
		h := rand.Uint64()
		splits = append(splits, h, h)
	}
	raw, err := encodeKeyDepth(splits, 7, "mallory")
	must(err)
	must(rdb.Set(ctx, k.keyDepth, raw, 0).Err())
	eventually(t, 5*time.Second, func() string {
		if got := r.coord.Stats().KeyDepthVersion; got != 7 {
			return fmt.Sprintf("KeyDepthVersion = %d, want 7", got)
		}
		return ""
	})
	got := r.sched.KeyDepthState().Splits
	slices.Sort(splits)
	want := slices.Compact(splits)[:100]
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("imported %d splits, want the 100 smallest distinct of the 150", len(got))
	}
}

// encodeRaw is appendLoad's encoding of values beyond int.
func encodeRaw(v ...uint64) string {
	var b []byte
	for _, x := range v {
		b = binary.AppendUvarint(b, x)
	}
	return string(b)
}

// TestReplicaFlood: thousands of fake members in T:replicas, kept alive:
// each heartbeat reads at most MaxReplicas of them, the most recent
// first, so the real replicas still see each other.
func TestReplicaFlood(t *testing.T) {
	addr, _, _ := startRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	k := newKeys(DefaultPrefix, "test")
	beatCtx, stopBeats := context.WithCancel(ctx)
	beats := make(chan struct{})
	defer func() { stopBeats(); <-beats }()
	go func() {
		defer close(beats)
		for beatCtx.Err() == nil {
			if now, err := rdb.Time(beatCtx).Result(); err == nil {
				zs := make([]redis.Z, 2000)
				for i := range zs {
					zs[i] = redis.Z{Score: float64(now.Add(-150 * time.Millisecond).UnixMilli()), Member: fmt.Sprintf("fake-%d", i)}
				}
				rdb.ZAdd(beatCtx, k.replicas, zs...)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	cmds := &commandCounter{}
	mod := func(o *RedisOptions) { o.MaxReplicas = 4 }
	a := newReplica(t, addr, "a", mod, cmds)
	b := newReplica(t, addr, "b", mod)
	b.route(t, testPrompt(1, 8))
	eventually(t, 5*time.Second, func() string {
		if a.coord.Stats().Replicas != 1 || a.store.Stats().Clamped == 0 {
			return fmt.Sprintf("a sees %d replicas with a load hash, Clamped = %d; want 1 (b) and > 0", a.coord.Stats().Replicas, a.store.Stats().Clamped)
		}
		return ""
	})
	start := cmds.n.Load()
	time.Sleep(time.Second)
	// About 10 heartbeats of 3 + 2*4 commands, 10 XREADs, a few flushes;
	// reading every member would be 2*2000 per heartbeat.
	if n := cmds.n.Load() - start; n > 1000 {
		t.Errorf("a sent %d commands in 1s, want under 1000", n)
	}
}
