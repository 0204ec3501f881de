package state

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/dualmap/dualmap/proto/statepb"
	"github.com/dualmap/dualmap/scheduler"
	"github.com/redis/go-redis/v9"
)

// presenceField is the load-hash field every replica writes, so that a
// replica of an empty pool is still seen as alive. Its value is the
// replica's heartbeat period in milliseconds.
const presenceField = "@"

// beat is the heartbeat loop's state. Only that loop touches it.
type beat struct {
	local, remote map[string]scheduler.Load
	args          []any
	others        []string
	lastData      time.Time // last time the others' loads were read
	cleared       bool      // remote loads were zeroed for lack of data
	kdVersion     int64     // key-depth version last published or imported
	wasLeader     bool      // held the key-depth lease at the last heartbeat
}

// heartbeatLoop runs a heartbeat at once and then every Heartbeat until ctx
// ends, backing off (up to 1s between attempts) while Redis fails, and
// clears the remote loads when they are 3 heartbeats old.
func (s *RedisStore) heartbeatLoop(ctx context.Context, a Applier) {
	t := time.NewTicker(s.opt.Heartbeat)
	defer t.Stop()
	b := &beat{
		local:    make(map[string]scheduler.Load),
		remote:   make(map[string]scheduler.Load),
		lastData: time.Now(),
	}
	var (
		bo      backoff
		retryAt time.Time
	)
	for {
		if began := time.Now(); !began.Before(retryAt) {
			err := s.heartbeat(ctx, a, b)
			switch {
			case err == nil:
				s.health.ok()
				bo.reset()
			case ctx.Err() != nil:
				return
			default:
				s.st.leader.Store(false) // cannot renew: assume the lease lost
				b.wasLeader = false
				s.health.failed("heartbeat", began, err)
				retryAt = began.Add(bo.fail())
			}
		}
		if !b.cleared && time.Since(b.lastData) > 3*s.opt.Heartbeat {
			s.st.replicas.Store(0)
			for id := range b.local {
				_ = a.SetRemoteLoad(id, scheduler.Load{}) // a zero load is always valid for a known id
			}
			b.cleared = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat is one round: two pipelined round trips (see the package doc).
func (s *RedisStore) heartbeat(ctx context.Context, a Applier, b *beat) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	me := s.opt.Replica
	ttl := max(3*s.opt.Heartbeat.Milliseconds(), 1)

	clear(b.local)
	a.LocalLoad(b.local)
	b.args = append(b.args[:0], me, ttl, presenceField, strconv.FormatInt(s.opt.Heartbeat.Milliseconds(), 10))
	var enc []byte
	for id, l := range b.local {
		enc = appendLoad(enc[:0], l)
		b.args = append(b.args, id, string(enc))
	}

	pipe := s.rdb.Pipeline()
	members := pipe.Eval(ctx, beatScript, []string{s.keys.load(me), s.keys.replicas}, b.args...)
	lease := pipe.Eval(ctx, leaseScript, []string{s.keys.leader}, me, ttl)
	kdGet := pipe.Get(ctx, s.keys.keyDepth)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	names, err := members.StringSlice()
	if err != nil {
		return err
	}
	held, err := lease.Int()
	if err != nil {
		return err
	}
	leader := held == 1
	s.st.leader.Store(leader)
	var published *statepb.KeyDepth
	if raw, err := kdGet.Result(); err == nil {
		if published, err = decodeKeyDepth(raw); err != nil {
			s.st.errors.Add(1) // the leader overwrites it below
		}
	}

	// A new leader starts from the pool's table, not its own (it may have
	// just started); from then on its own table is the pool's.
	if leader && !b.wasLeader && published != nil && published.Leader != me {
		a.ImportKeyDepth(scheduler.KeyDepthState{Splits: published.Splits})
		b.kdVersion = published.Version
	}
	b.wasLeader = leader
	// The key-depth update the leader owes, if any.
	cur := a.KeyDepthState()
	var update []byte
	var updateVersion int64
	if leader && (published == nil || published.Leader != me || !slices.Equal(published.Splits, cur.Splits)) {
		updateVersion = max(published.GetVersion(), b.kdVersion) + 1
		if update, err = encodeKeyDepth(cur.Splits, updateVersion, me); err != nil {
			return err
		}
	}

	b.others = b.others[:0]
	for _, r := range names {
		if r != me {
			b.others = append(b.others, r)
		}
	}
	pipe = s.rdb.Pipeline()
	loads := make([]*redis.MapStringStringCmd, len(b.others))
	for i, r := range b.others {
		loads[i] = pipe.HGetAll(ctx, s.keys.load(r))
	}
	if update != nil {
		pipe.Set(ctx, s.keys.keyDepth, update, 0)
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}

	s.applyLoads(a, b, loads)
	switch {
	case update != nil:
		b.kdVersion = updateVersion
		s.st.keyDepthVersion.Store(updateVersion)
	case !leader && published != nil && (published.Version != b.kdVersion || !slices.Equal(published.Splits, cur.Splits)):
		a.ImportKeyDepth(scheduler.KeyDepthState{Splits: published.Splits})
		b.kdVersion = published.Version
		s.st.keyDepthVersion.Store(published.Version)
	}
	return nil
}

// applyLoads sums the other replicas' load hashes per instance and sets
// every local instance's remote load (zero where nobody reports).
func (s *RedisStore) applyLoads(a Applier, b *beat, loads []*redis.MapStringStringCmd) {
	clear(b.remote)
	live := 0
	for _, c := range loads {
		m := c.Val()
		if len(m) == 0 { // expired between the two round trips
			continue
		}
		live++
		for id, v := range m {
			if id == presenceField {
				continue
			}
			l, err := decodeLoad(v)
			if err != nil {
				s.st.errors.Add(1)
				continue
			}
			sum := b.remote[id]
			sum.Queued += l.Queued
			sum.QueuedTokens += l.QueuedTokens
			sum.PendingTokens += l.PendingTokens
			sum.Running += l.Running
			b.remote[id] = sum
		}
	}
	for id := range b.local {
		_ = a.SetRemoteLoad(id, b.remote[id]) // ids come from the Applier, sums are >= 0
	}
	s.st.replicas.Store(int64(live))
	b.lastData = time.Now()
	b.cleared = false
}
