package state

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/redis/go-redis/v9"
)

// opTimeout bounds one background Redis round trip (a flush, a heartbeat
// pipeline); leaveTimeout bounds the clean-up when Run ends.
const (
	opTimeout    = time.Second
	leaveTimeout = 500 * time.Millisecond
)

// RedisStore is the Store of replicas that share a pool through Redis. See
// the package doc for the protocol. Create it with NewRedis, call Run once
// (it may be called again after it returned), and Close it when done.
type RedisStore struct {
	opt  RedisOptions
	keys keys
	rdb  redis.UniversalClient

	guard *replyGuard // in rdb's Dialer

	st     counters
	health health
	lat    latency
	buf    *buffer
	pub    publisher // owned by the publish loop, then by Run's clean-up
	rd     reader    // owned by Receive

	running atomic.Bool
	// skipLeave makes Run end without its clean-up, like a killed
	// process (tests).
	skipLeave bool
}

var _ Store = (*RedisStore)(nil)

// NewRedis returns a store for opt's pool. It does not connect: Run does,
// and keeps retrying while Redis is unreachable.
func NewRedis(opt RedisOptions) (*RedisStore, error) {
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	guard := &replyGuard{opt: opt, log: opt.Logger.With("pool", opt.Pool, "replica", opt.Replica)}
	s := &RedisStore{
		opt:  opt,
		keys: newKeys(opt.Prefix, opt.Pool),
		rdb: redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs:      opt.Addrs,
			MasterName: opt.MasterName,
			Username:   opt.Username,
			Password:   opt.Password,
			DB:         opt.DB,
			TLSConfig:  opt.TLS,
			ClientName: "dualmap-" + opt.Replica,
			// The loops retry on their own schedule, and every call
			// carries a deadline that must hold. One quick retry
			// replaces a pooled connection that died with a restart.
			MaxRetries:            1,
			MinRetryBackoff:       5 * time.Millisecond,
			MaxRetryBackoff:       50 * time.Millisecond,
			DialerRetries:         1,
			DialTimeout:           opTimeout,
			ReadTimeout:           opTimeout,
			WriteTimeout:          opTimeout,
			PoolTimeout:           opTimeout,
			ContextTimeoutEnabled: true,
			SentinelUsername:      opt.SentinelUsername,
			SentinelPassword:      opt.SentinelPassword,
			Dialer:                guard.dial, // replies are checked as they are read
		}),
	}
	s.guard = guard
	s.health = health{log: opt.Logger.With("pool", opt.Pool, "replica", opt.Replica), st: &s.st}
	s.buf = newBuffer(opt.Buffer, &s.st)
	return s, nil
}

// Replica implements coord.Transport.
func (s *RedisStore) Replica() string { return s.opt.Replica }

// Dispatched implements Store.
func (s *RedisStore) Dispatched(instance string, blocks []uint64) {
	s.buf.add(instance, blocks, time.Now)
}

// Stats implements Store.
func (s *RedisStore) Stats() Stats {
	var st Stats
	s.st.fill(&st)
	s.health.fill(&st)
	s.lat.fill(&st)
	st.Buffered = s.buf.len() + int(s.pub.waiting.Load())
	st.RefusedReplies = s.guard.refused.Load()
	return st
}

// Run implements Store. It runs three goroutines, each ending with ctx: the
// publisher (every Flush), the stream reader (c.Receive), and the heartbeat
// (c.Sync every c.Heartbeat()). When ctx ends they stop within about 100ms
// (1.1s if Redis hangs mid-read); Run then publishes what is buffered and
// makes c leave (delete its load hash, release the key-depth lease), giving
// that at most 500ms, and returns nil.
func (s *RedisStore) Run(ctx context.Context, c *coord.Coordinator) error {
	if c == nil {
		return fmt.Errorf("state: redis store: %w", ErrNoCoordinator)
	}
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("state: redis store %s: %w", s.opt.Replica, ErrRunning)
	}
	defer s.running.Store(false)
	var wg sync.WaitGroup
	wg.Go(func() { s.publishLoop(ctx) })
	wg.Go(func() { s.readLoop(ctx, c) })
	wg.Go(func() { s.heartbeatLoop(ctx, c) })
	wg.Wait()
	if !s.skipLeave {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
		defer cancel()
		if err := s.safely("final flush", func() error { _, err := s.flush(lctx); return err }); err != nil {
			s.health.log.Debug("state: final flush failed", "err", err)
		}
		if err := s.safely("leave", func() error { return c.Leave(lctx) }); err != nil {
			s.health.log.Debug("state: leave failed", "err", err)
		}
	}
	return nil
}

// Leave implements coord.Transport: it deletes this replica's state and
// load hash, removes it from T:replicas and releases the key-depth lease
// if it holds it, in one pipeline.
func (s *RedisStore) Leave(ctx context.Context) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.keys.state(s.opt.Replica), s.keys.load(s.opt.Replica))
		p.ZRem(ctx, s.keys.replicas, s.opt.Replica)
		p.Eval(ctx, releaseScript, []string{s.keys.leader}, s.opt.Replica)
		return nil
	})
	return err
}

// Close closes the Redis connections. Call it after Run returned.
func (s *RedisStore) Close() error {
	if err := s.rdb.Close(); err != nil {
		return fmt.Errorf("state: close: %w", err)
	}
	return nil
}
