package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
	"github.com/redis/go-redis/v9"
)

// TestMixedVersions runs replicas of this release beside a replica of the
// release before ReplicaState (legacyTransport: its Beat, Collect and
// Leave as they were, with their own encoder and decoder) on one real
// Redis, as during a rolling upgrade: every replica sees the sum of the
// others' loads, in both directions, and they agree on the rest.
func TestMixedVersions(t *testing.T) {
	addr, _, _ := startRedis(t)
	rs := []*replica{
		newReplica(t, addr, "new-0", nil),
		newReplicaOver(t, addr, "old", nil, func(s *RedisStore) coord.Transport { return legacyTransport{s} }),
		newReplica(t, addr, "new-1", nil),
	}
	checkAgreement(t, rs, 1)
	checkNoOutage(t, rs)

	// Both formats were on the wire: the new replicas wrote T:state and
	// the legacy hash, the old one the hash only.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	k := newKeys(DefaultPrefix, "test")
	ctx := context.Background()
	for _, r := range rs {
		n, err := rdb.Exists(ctx, k.state(r.name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(1); r.name == "old" {
			if n != 0 {
				t.Errorf("EXISTS %s = %d, want 0 (an old replica writes no state)", k.state(r.name), n)
			}
		} else if n != want {
			t.Errorf("EXISTS %s = %d, want 1", k.state(r.name), n)
		}
		if n, err := rdb.Exists(ctx, k.load(r.name)).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v; want 1 (every replica of this release still writes it)", k.load(r.name), n, err)
		}
	}
	for _, r := range rs {
		if st := r.store.Stats(); st.Malformed != 0 || st.Errors != 0 {
			t.Errorf("%s: Stats() = %+v, want nothing malformed and no error", r.name, st)
		}
	}
}

// TestStateReplacesLegacyHash: a replica that wrote T:state is read from
// it, not from its legacy hash, even when the two disagree; without
// T:state the hash is read.
func TestStateReplacesLegacyHash(t *testing.T) {
	addr, _, _ := startRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	r := newReplica(t, addr, "reader", nil)
	k := newKeys(DefaultPrefix, "test")
	id := testPool(8)[0].ID
	state, err := encodeState(map[string]scheduler.Load{id: {Running: 3, PendingTokens: 30}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.state("w"), k.load("w")} {
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rdb.Set(ctx, k.state("w"), state, time.Hour).Err())
	must(rdb.HSet(ctx, k.load("w"), presenceField, "100", id, legacyAppendLoad(nil, scheduler.Load{Running: 9, PendingTokens: 90})).Err())
	must(rdb.PExpire(ctx, k.load("w"), time.Hour).Err())
	peers, err := r.store.Collect(ctx, []string{"w"}, nil)
	if err != nil || len(peers) != 1 {
		t.Fatalf("Collect() = %v, %v; want one peer", peers, err)
	}
	if got, want := peers[0].Load[id], (scheduler.Load{Running: 3, PendingTokens: 30}); got != want {
		t.Errorf("Collect() load of %s = %+v, want %+v (from T:state)", id, got, want)
	}
	must(rdb.Del(ctx, k.state("w")).Err())
	peers, err = r.store.Collect(ctx, []string{"w"}, nil)
	if err != nil || len(peers) != 1 {
		t.Fatalf("Collect() without T:state = %v, %v; want one peer", peers, err)
	}
	if got, want := peers[0].Load[id], (scheduler.Load{Running: 9, PendingTokens: 90}); got != want {
		t.Errorf("Collect() without T:state: load of %s = %+v, want %+v (from the hash)", id, got, want)
	}
}

// TestHostileState: what a writer to Redis can put in T:state is refused
// or cut, counted, and the other replicas are still read.
func TestHostileState(t *testing.T) {
	addr, _, _ := startRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	const maxReqs, maxTokens, maxBytes = 100, 1000, 4096
	r := newReplica(t, addr, "reader", func(o *RedisOptions) {
		o.MaxLoadRequests, o.MaxLoadTokens, o.MaxStateBytes = maxReqs, maxTokens, maxBytes
	})
	k := newKeys(DefaultPrefix, "test")
	id := testPool(8)[0].ID
	good, err := encodeState(map[string]scheduler.Load{id: {Running: 1}})
	if err != nil {
		t.Fatal(err)
	}
	huge, err := encodeState(map[string]scheduler.Load{id: {Queued: 1 << 40, QueuedTokens: 1 << 62, PendingTokens: maxTokens, Running: maxReqs + 1}})
	if err != nil {
		t.Fatal(err)
	}
	big := make(map[string]scheduler.Load)
	for i := range 1000 {
		big[fmt.Sprintf("10.1.%d.%d:8000", i/256, i%256)] = scheduler.Load{Running: 1}
	}
	oversized, err := encodeState(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(oversized) <= maxBytes {
		t.Fatalf("oversized state is %d bytes, want > %d", len(oversized), maxBytes)
	}
	tests := []struct {
		name  string
		value string
		ttl   time.Duration // 0: no expiry
		want  *scheduler.Load
		stat  func(Stats) uint64
	}{
		{"clamped", string(huge), time.Hour, &scheduler.Load{Queued: maxReqs, QueuedTokens: maxTokens, PendingTokens: maxTokens, Running: maxReqs}, func(s Stats) uint64 { return s.Clamped }},
		{"garbage", "\xff\xff\xff", time.Hour, nil, func(s Stats) uint64 { return s.Malformed }},
		{"above MaxStateBytes", string(oversized), time.Hour, nil, func(s Stats) uint64 { return s.Oversized }},
		{"no expiry", string(good), 0, nil, func(s Stats) uint64 { return s.Ignored }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := rdb.Set(ctx, k.state("mallory"), tt.value, tt.ttl).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Set(ctx, k.state("alice"), good, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			before := tt.stat(r.store.Stats())
			peers, err := r.store.Collect(ctx, []string{"mallory", "alice"}, nil)
			if err != nil {
				t.Fatalf("Collect() error = %v", err)
			}
			if got := tt.stat(r.store.Stats()) - before; got != 1 {
				t.Errorf("counter grew by %d, want 1", got)
			}
			var sawAlice bool
			for _, p := range peers {
				switch p.Replica {
				case "alice":
					sawAlice = p.Load[id] == scheduler.Load{Running: 1}
				case "mallory":
					if tt.want == nil {
						t.Errorf("Collect() returned mallory's load %+v, want it skipped", p.Load)
					} else if got := p.Load[id]; got != *tt.want {
						t.Errorf("Collect() mallory's load = %+v, want %+v", got, *tt.want)
					}
				}
			}
			if !sawAlice {
				t.Errorf("Collect() = %+v, want alice's load read beside mallory's", peers)
			}
		})
	}
}

// legacyTransport is a replica of the release before ReplicaState: the
// store's Beat, Collect and Leave as they were then (the load hash with
// positional values only), everything else shared.
type legacyTransport struct{ *RedisStore }

func (l legacyTransport) Beat(ctx context.Context, b coord.Beat) (coord.Seen, error) {
	s := l.RedisStore
	me := s.opt.Replica
	ttl := max(b.TTL.Milliseconds(), 1)
	args := make([]any, 0, 5+2*len(b.Load))
	args = append(args, me, ttl, s.opt.MaxReplicas, presenceField, strconv.FormatInt(b.Period.Milliseconds(), 10))
	var enc []byte
	for id, ld := range b.Load {
		enc = legacyAppendLoad(enc[:0], ld)
		args = append(args, id, string(enc))
	}
	pipe := s.rdb.Pipeline()
	members := pipe.Eval(ctx, legacyBeatScript, []string{s.keys.load(me), s.keys.replicas}, args...)
	lease := pipe.Eval(ctx, leaseScript, []string{s.keys.leader}, me, ttl)
	kdGet := pipe.Eval(ctx, boundedGetScript, []string{s.keys.keyDepth}, s.opt.MaxKeyDepthBytes)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return coord.Seen{}, err
	}
	names, err := s.beatMembers(members)
	if err != nil {
		return coord.Seen{}, err
	}
	held, err := lease.Int()
	if err != nil {
		return coord.Seen{}, err
	}
	return coord.Seen{Members: names, Leader: held == 1, Table: s.keyDepth(kdGet)}, nil
}

func (l legacyTransport) Collect(ctx context.Context, replicas []string, t *coord.Table) ([]coord.Peer, error) {
	s := l.RedisStore
	var update []byte
	if t != nil {
		var err error
		if update, err = encodeKeyDepth(t.Splits, t.Version, t.Leader); err != nil {
			return nil, err
		}
	}
	pipe := s.rdb.Pipeline()
	loads := make([]*redis.MapStringStringCmd, len(replicas))
	ttls := make([]*redis.DurationCmd, len(replicas))
	for i, r := range replicas {
		loads[i] = pipe.HGetAll(ctx, s.keys.load(r))
		ttls[i] = pipe.PTTL(ctx, s.keys.load(r))
	}
	if update != nil {
		pipe.Set(ctx, s.keys.keyDepth, update, 0)
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	peers := make([]coord.Peer, 0, len(replicas))
	for i, c := range loads {
		m := c.Val()
		if len(m) == 0 || ttls[i].Val() < 0 {
			continue
		}
		p := coord.Peer{Replica: replicas[i], Load: make(map[string]scheduler.Load, len(m))}
		for id, v := range m {
			if id == presenceField {
				continue
			}
			ld, err := legacyDecodeLoad(v)
			if err != nil {
				s.st.errors.Add(1)
				s.st.malformed.Add(1)
				continue
			}
			p.Load[id] = ld
		}
		peers = append(peers, p)
	}
	return peers, nil
}

func (l legacyTransport) Leave(ctx context.Context) error {
	s := l.RedisStore
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.keys.load(s.opt.Replica))
		p.ZRem(ctx, s.keys.replicas, s.opt.Replica)
		p.Eval(ctx, releaseScript, []string{s.keys.leader}, s.opt.Replica)
		return nil
	})
	return err
}

// legacyBeatScript is beatScript before ReplicaState.
const legacyBeatScript = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('DEL', KEYS[1])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))
local future = redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. (now + ttl), '+inf')
return {future, redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1), redis.call('ZCARD', KEYS[2])}
`

// legacyAppendLoad and legacyDecodeLoad are the old release's codec,
// kept apart from this one's so that a change here cannot hide a break.
func legacyAppendLoad(dst []byte, l scheduler.Load) []byte {
	for _, v := range [...]int{l.Queued, l.QueuedTokens, l.PendingTokens, l.Running} {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	return dst
}

func legacyDecodeLoad(s string) (scheduler.Load, error) {
	var v [4]int
	for i := range v {
		x, n := binary.Uvarint([]byte(s))
		if n <= 0 {
			return scheduler.Load{}, fmt.Errorf("field %d of %q", i, s)
		}
		v[i] = int(min(x, 1<<24))
		s = s[n:]
	}
	return scheduler.Load{Queued: v[0], QueuedTokens: v[1], PendingTokens: v[2], Running: v[3]}, nil
}
