package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
	"github.com/redis/go-redis/v9"
)

// presenceField is the load-hash field every replica writes, so that a
// replica of an empty pool is still seen as alive. Its value is the
// replica's heartbeat period in milliseconds.
const presenceField = "@"

// heartbeatLoop runs c.Sync at once and then every c.Heartbeat() until ctx
// ends, backing off (up to 1s between attempts) while Redis fails; c clears
// the remote loads when they are 3 heartbeats old.
func (s *RedisStore) heartbeatLoop(ctx context.Context, c *coord.Coordinator) {
	t := time.NewTicker(c.Heartbeat())
	defer t.Stop()
	var (
		bo      backoff
		retryAt time.Time
	)
	for {
		if began := time.Now(); !began.Before(retryAt) {
			rctx, cancel := context.WithTimeout(ctx, opTimeout)
			err := s.safely("heartbeat", func() error { return c.Sync(rctx) })
			cancel()
			switch {
			case err == nil:
				s.health.ok("heartbeat")
				bo.reset()
			case ctx.Err() != nil:
				return
			default:
				s.health.failed("heartbeat", began, err)
				retryAt = began.Add(bo.fail())
			}
		}
		if err := s.safely("expire", func() error { c.Expire(); return nil }); err != nil {
			retryAt = time.Now().Add(bo.fail())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Beat implements coord.Transport with one pipeline: beatScript (replace
// the state and the legacy load hash, PEXPIRE, ZADD with Redis's clock,
// drop the members not seen within the TTL, return the rest), leaseScript
// on T:kd:leader, and GET T:kd.
func (s *RedisStore) Beat(ctx context.Context, b coord.Beat) (coord.Seen, error) {
	me := s.opt.Replica
	ttl := max(b.TTL.Milliseconds(), 1)
	state, err := encodeState(b.Load)
	if err != nil {
		return coord.Seen{}, err
	}
	if keys := s.opt.RecordKeys; len(keys) > 0 {
		state = seal(keys[0], s.opt.Pool, me, time.Now(), state)
	}
	args := make([]any, 0, 6+2*len(b.Load))
	args = append(args, me, ttl, s.opt.MaxReplicas, state, presenceField, strconv.FormatInt(b.Period.Milliseconds(), 10))
	var enc []byte
	for id, l := range b.Load {
		enc = appendLoad(enc[:0], l)
		args = append(args, id, string(enc))
	}

	pipe := s.rdb.Pipeline()
	members := pipe.Eval(ctx, beatScript, []string{s.keys.load(me), s.keys.replicas, s.keys.state(me)}, args...)
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
	seen := coord.Seen{Members: names, Leader: held == 1}
	seen.Table = s.keyDepth(kdGet)
	return seen, nil
}

// beatMembers reads beatScript's reply: the live members, after counting
// the members scored in the future that it dropped.
func (s *RedisStore) beatMembers(c *redis.Cmd) ([]string, error) {
	v, err := c.Slice()
	if err != nil {
		return nil, err
	}
	future, ok1 := pick[int64](v, 0)
	list, ok2 := pick[[]any](v, 1)
	total, ok3 := pick[int64](v, 2)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("state: beat: unexpected reply %T", v)
	}
	if total > int64(len(list)) {
		s.st.clamped.Add(1)
		s.health.log.Debug("state: more live replicas than MaxReplicas; reading the most recent", "replicas", total, "max", s.opt.MaxReplicas)
	}
	if future > 0 {
		s.st.ignored.Add(uint64(future))
		s.health.log.Debug("state: dropped replicas whose heartbeat is scored in the future", "n", future)
	}
	names := make([]string, 0, len(list))
	for _, m := range list {
		if name, ok := m.(string); ok {
			names = append(names, name)
		}
	}
	return names, nil
}

// pick returns v[i] as a T.
func pick[T any](v []any, i int) (T, bool) {
	var zero T
	if i >= len(v) {
		return zero, false
	}
	x, ok := v[i].(T)
	return x, ok
}

// keyDepth reads boundedGetScript's reply for T:kd: nil when there is no
// table, it is too large (Stats.Oversized) or it does not decode
// (Stats.Malformed; the leader overwrites it). The splits are sorted,
// deduplicated and cut to MaxSplits (Stats.Clamped).
func (s *RedisStore) keyDepth(c *redis.Cmd) *coord.Table {
	v, err := c.Result()
	if err != nil { // redis.Nil: no table yet; other errors failed Exec
		return nil
	}
	raw, ok := v.(string)
	if !ok {
		s.st.oversized.Add(1)
		s.health.log.Debug("state: key-depth table above MaxKeyDepthBytes not read", "bytes", v, "max", s.opt.MaxKeyDepthBytes)
		return nil
	}
	kd, err := decodeKeyDepth(raw)
	if err != nil || kd.Version < 0 || kd.Version > maxTableVersion {
		s.st.errors.Add(1)
		s.st.malformed.Add(1)
		return nil
	}
	splits := kd.Splits
	if !slices.IsSorted(splits) {
		slices.Sort(splits)
	}
	if n := len(splits); n > 0 {
		splits = slices.Compact(splits)
		if len(splits) > s.opt.MaxSplits {
			splits = splits[:s.opt.MaxSplits]
		}
		if len(splits) != n {
			s.st.clamped.Add(1)
		}
	}
	return &coord.Table{Splits: splits, Version: kd.Version, Leader: kd.Leader}
}

// maxTableVersion bounds a key-depth table's version, so that the next
// leader's version + 1 cannot overflow.
const maxTableVersion = 1 << 62

// Collect implements coord.Transport with one pipeline: GETRANGE (at most
// MaxStateBytes + 1 bytes) and PTTL of each replica's T:state, and SET T:kd
// when t is not nil; then, only for replicas without T:state (a replica of
// the release before ReplicaState, during an upgrade), a second one:
// HGETALL and PTTL of their legacy load hash. A replica whose keys expired
// since Beat is left out. Values that do not decode are skipped and
// counted as errors.
func (s *RedisStore) Collect(ctx context.Context, replicas []string, t *coord.Table) ([]coord.Peer, error) {
	var update []byte
	if t != nil {
		var err error
		if update, err = encodeKeyDepth(t.Splits, t.Version, t.Leader); err != nil {
			return nil, err
		}
	}
	pipe := s.rdb.Pipeline()
	states := make([]*redis.StringCmd, len(replicas))
	ttls := make([]*redis.DurationCmd, len(replicas))
	for i, r := range replicas {
		states[i] = pipe.GetRange(ctx, s.keys.state(r), 0, int64(s.opt.MaxStateBytes))
		ttls[i] = pipe.PTTL(ctx, s.keys.state(r))
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
	now := time.Now()
	var legacy []string
	for i, c := range states {
		switch ttl := ttls[i].Val(); {
		case ttl == -2*time.Nanosecond: // no T:state: an older replica, or expired
			legacy = append(legacy, replicas[i])
			continue
		case ttl < 0: // -1: no expiry; every replica sets one
			s.st.ignored.Add(1)
			continue
		}
		v := c.Val()
		if len(v) > s.opt.MaxStateBytes {
			s.st.oversized.Add(1)
			s.health.log.Debug("state: replica state above MaxStateBytes not read", "replica", replicas[i], "max", s.opt.MaxStateBytes)
			continue
		}
		v, err := unseal(s.opt.RecordKeys, s.opt.Pool, replicas[i], now, s.opt.RecordMaxAge, v)
		if err != nil {
			s.st.unsigned.Add(1)
			s.health.log.Debug("state: skipping a replica's state not signed with a record key", "replica", replicas[i], "err", err)
			continue
		}
		load, clamped, err := decodeState(v, s.opt.MaxLoadRequests, s.opt.MaxLoadTokens)
		if err != nil {
			s.st.errors.Add(1)
			s.st.malformed.Add(1)
			s.health.log.Debug("state: skipping a replica's state", "replica", replicas[i], "err", err)
			continue
		}
		if clamped {
			s.st.clamped.Add(1)
		}
		peers = append(peers, coord.Peer{Replica: replicas[i], Load: load})
	}
	if len(legacy) == 0 {
		return peers, nil
	}
	if len(s.opt.RecordKeys) > 0 { // load hashes cannot be signed: counted, not read
		pipe := s.rdb.Pipeline()
		for _, r := range legacy {
			pipe.Exists(ctx, s.keys.load(r))
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			if n, _ := c.(*redis.IntCmd).Result(); n > 0 {
				s.st.unsigned.Add(1)
			}
		}
		return peers, nil
	}
	old, err := s.collectLegacy(ctx, legacy)
	if err != nil {
		return nil, err
	}
	return append(peers, old...), nil
}

// collectLegacy reads the load hashes of replicas that wrote no T:state:
// HGETALL and PTTL of each, in one pipeline. A hash that expired reads
// empty: that replica is left out. Values that do not decode are skipped
// and counted as errors.
func (s *RedisStore) collectLegacy(ctx context.Context, replicas []string) ([]coord.Peer, error) {
	pipe := s.rdb.Pipeline()
	loads := make([]*redis.MapStringStringCmd, len(replicas))
	ttls := make([]*redis.DurationCmd, len(replicas))
	for i, r := range replicas {
		loads[i] = pipe.HGetAll(ctx, s.keys.load(r))
		ttls[i] = pipe.PTTL(ctx, s.keys.load(r))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	peers := make([]coord.Peer, 0, len(replicas))
	for i, c := range loads {
		m := c.Val()
		if len(m) == 0 { // expired between the two round trips
			continue
		}
		if ttls[i].Val() < 0 { // -1: no expiry; every replica sets one
			s.st.ignored.Add(1)
			continue
		}
		p := coord.Peer{Replica: replicas[i], Load: make(map[string]scheduler.Load, len(m))}
		for id, v := range m {
			if id == presenceField {
				continue
			}
			l, clamped, err := decodeLoad(v, s.opt.MaxLoadRequests, s.opt.MaxLoadTokens)
			if err != nil {
				s.st.errors.Add(1)
				s.st.malformed.Add(1)
				continue
			}
			if clamped {
				s.st.clamped.Add(1)
			}
			p.Load[id] = l
		}
		peers = append(peers, p)
	}
	return peers, nil
}
