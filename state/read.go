package state

import (
	"context"
	"errors"
	"time"

	"github.com/dualmap/dualmap/proto/statepb"
	"github.com/redis/go-redis/v9"
)

// Reader tuning: how long one XREAD waits for new entries (short, so a
// cancelled ctx ends the loop promptly) and how many entries it takes.
const (
	readBlock = 100 * time.Millisecond
	readCount = 256
)

// readLoop follows the dispatch stream until ctx ends and applies the other
// replicas' records to a. It starts from the beginning of the stream, and
// starts over after every outage (see health.epoch), so that it is warm.
func (s *RedisStore) readLoop(ctx context.Context, a Applier) {
	var (
		bo      backoff
		msg     statepb.DispatchBatch
		last    = "0"
		epoch   = s.health.currentEpoch()
		startAt = time.Now() // batches older than this are backlog
	)
	for ctx.Err() == nil {
		if e := s.health.currentEpoch(); e != epoch {
			epoch, last, startAt = e, "0", time.Now()
		}
		began := time.Now()
		rctx, cancel := context.WithTimeout(ctx, readBlock+opTimeout)
		res, err := s.rdb.XRead(rctx, &redis.XReadArgs{
			Streams: []string{s.keys.stream, last},
			Count:   readCount,
			Block:   readBlock,
		}).Result()
		cancel()
		switch {
		case errors.Is(err, redis.Nil): // nothing new within readBlock
			s.health.ok()
			bo.reset()
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			s.health.failed("read", began, err)
			if !sleep(ctx, bo.fail()) {
				return
			}
			continue
		}
		s.health.ok()
		bo.reset()
		for _, st := range res {
			for _, m := range st.Messages {
				last = m.ID
				s.apply(a, m.Values, &msg, startAt)
			}
		}
	}
}

// apply applies one stream entry unless this replica wrote it.
func (s *RedisStore) apply(a Applier, v map[string]any, msg *statepb.DispatchBatch, startAt time.Time) {
	if r, _ := v["r"].(string); r == s.opt.Replica {
		return
	}
	d, ok := v["d"].(string)
	if !ok {
		s.st.errors.Add(1)
		return
	}
	if err := decodeBatch(d, msg); err != nil {
		s.st.errors.Add(1)
		s.health.log.Debug("state: skipping malformed stream entry", "err", err)
		return
	}
	for _, dp := range msg.Dispatches {
		if err := a.RecordCached(dp.Instance, dp.Blocks, time.Unix(0, msg.UnixNanos)); err != nil {
			s.st.unknown.Add(1)
			continue
		}
		s.st.applied.Add(1)
	}
	if t := time.Unix(0, msg.UnixNanos); !t.Before(startAt) {
		s.lat.add(time.Since(t))
	}
}
