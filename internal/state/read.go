package state

import (
	"context"
	"errors"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/proto/statepb"
	"github.com/redis/go-redis/v9"
)

// Reader tuning: how long one XREAD waits for new entries (short, so a
// cancelled ctx ends the loop promptly) and how many entries it takes.
const (
	readBlock = 100 * time.Millisecond
	readCount = 256
)

// reader is the stream reader's position. Only Receive touches it (the
// read loop is its one caller).
type reader struct {
	last    string // last entry id read; "" before the first read
	epoch   uint64 // health epoch the position belongs to
	startAt time.Time
	msg     statepb.DispatchBatch
}

// readLoop runs c.Receive until ctx ends, backing off while Redis fails.
func (s *RedisStore) readLoop(ctx context.Context, c *coord.Coordinator) {
	var bo backoff
	for ctx.Err() == nil {
		began := time.Now()
		err := s.safely("read", func() error { return c.Receive(ctx) })
		if err == nil {
			s.health.ok("read")
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.health.failed("read", began, err)
		if !sleep(ctx, bo.fail()) {
			return
		}
	}
}

// Receive implements coord.Transport: one XREAD BLOCK 100ms from the last
// entry read, skipping this replica's own entries. It starts from the
// beginning of the stream, and starts over after every outage (see
// health.epoch), so that a replica is warm; batches older than that start
// are backlog and do not count in the propagation figures.
func (s *RedisStore) Receive(ctx context.Context) ([]coord.Batch, error) {
	r := &s.rd
	if e := s.health.currentEpoch(); e != r.epoch || r.last == "" {
		r.epoch, r.last, r.startAt = e, "0", time.Now()
	}
	rctx, cancel := context.WithTimeout(ctx, readBlock+opTimeout)
	defer cancel()
	res, err := s.rdb.XRead(rctx, &redis.XReadArgs{
		Streams: []string{s.keys.stream, r.last},
		Count:   readCount,
		Block:   readBlock,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil): // nothing new within readBlock
		return nil, nil
	case err != nil:
		return nil, err
	}
	var out []coord.Batch
	for _, st := range res {
		for _, m := range st.Messages {
			r.last = m.ID
			if b, ok := s.decode(m.Values); ok {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// decode turns one stream entry into a batch, unless this replica wrote it
// or it is malformed (counted).
func (s *RedisStore) decode(v map[string]any) (coord.Batch, bool) {
	replica, _ := v["r"].(string)
	if replica == s.opt.Replica {
		return coord.Batch{}, false
	}
	d, ok := v["d"].(string)
	if !ok {
		s.st.errors.Add(1)
		s.st.malformed.Add(1)
		return coord.Batch{}, false
	}
	msg := &s.rd.msg
	if err := decodeBatch(d, msg); err != nil {
		s.st.errors.Add(1)
		s.st.malformed.Add(1)
		s.health.log.Debug("state: skipping malformed stream entry", "err", err)
		return coord.Batch{}, false
	}
	now := time.Now()
	b := coord.Batch{Replica: replica, At: batchTime(msg.UnixNanos, now, &s.st), Records: make([]coord.Record, len(msg.Dispatches))}
	for i, dp := range msg.Dispatches {
		b.Records[i] = coord.Record{Instance: dp.Instance, Blocks: dp.Blocks} // Unmarshal allocates afresh
	}
	if !b.At.Before(s.rd.startAt) {
		s.lat.add(max(now.Sub(b.At), 0))
	}
	return b, true
}

// clockSkew is how far in the future a batch may be stamped (another
// host's clock) before its time is not believed.
const clockSkew = time.Second

// batchTime is when a batch stamped unixNanos was recorded, as far as this
// replica believes it: a stamp before 1970 is the epoch (history, not
// fresh load), one more than clockSkew ahead of now is now; both count in
// BadClock.
func batchTime(unixNanos int64, now time.Time, st *counters) time.Time {
	at := time.Unix(0, unixNanos)
	switch {
	case unixNanos < 0:
		st.badClock.Add(1)
		return time.Unix(0, 0)
	case at.After(now.Add(clockSkew)):
		st.badClock.Add(1)
		return now
	}
	return at
}
