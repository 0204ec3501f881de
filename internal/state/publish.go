package state

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// publisher holds the records taken from the buffer that are not yet in
// Redis. Only the publish loop (and, after it, leave) touches it, except
// waiting, which Stats reads.
type publisher struct {
	pending []record
	cost    int
	oldest  time.Time
	waiting atomic.Int64 // len(pending)
}

// publishLoop flushes the buffer every Flush period until ctx ends,
// backing off while Redis fails.
func (s *RedisStore) publishLoop(ctx context.Context) {
	t := time.NewTicker(s.opt.Flush)
	defer t.Stop()
	var bo backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		var sent bool
		err := s.safely("publish", func() (err error) {
			sent, err = s.flush(ctx)
			return err
		})
		if err == nil {
			if sent {
				s.health.ok("publish")
			}
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.health.failed("publish", began, err)
		if !sleep(ctx, bo.fail()) {
			return
		}
	}
}

// flush moves the buffer to the pending records and XADDs them, in one
// pipeline. On failure the records stay pending (bounded like the buffer:
// the oldest are dropped first) for the next attempt. It reports whether
// anything was written.
func (s *RedisStore) flush(ctx context.Context) (bool, error) {
	p := &s.pub
	if recs, oldest := s.buf.take(); len(recs) > 0 {
		if len(p.pending) == 0 {
			p.oldest = oldest
		}
		for _, r := range recs {
			p.cost += r.cost()
		}
		p.pending = append(p.pending, recs...)
		p.trim(s.opt.Buffer, &s.st)
	}
	if len(p.pending) == 0 {
		return false, nil
	}
	entries, err := encodeBatches(s.opt.Replica, p.pending, p.oldest)
	if err != nil { // cannot happen: ids are valid UTF-8; drop rather than loop
		s.st.dropped.Add(uint64(len(p.pending)))
		p.reset()
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err = s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, e := range entries {
			pipe.XAdd(ctx, &redis.XAddArgs{
				Stream: s.keys.stream,
				MaxLen: s.opt.StreamMaxLen,
				Approx: true,
				Values: []any{"r", s.opt.Replica, "d", e},
			})
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.st.published.Add(uint64(len(p.pending)))
	s.st.batches.Add(uint64(len(entries)))
	p.reset()
	return true, nil
}

// trim drops the oldest pending records beyond limit, counting them.
func (p *publisher) trim(limit int, st *counters) {
	i := 0
	for p.cost > limit && i < len(p.pending) {
		p.cost -= p.pending[i].cost()
		i++
	}
	if i > 0 {
		st.dropped.Add(uint64(i))
		n := copy(p.pending, p.pending[i:])
		clear(p.pending[n:])
		p.pending = p.pending[:n]
	}
	p.waiting.Store(int64(len(p.pending)))
}

func (p *publisher) reset() {
	clear(p.pending)
	p.pending, p.cost = p.pending[:0], 0
	p.waiting.Store(0)
}
