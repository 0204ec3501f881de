package pool

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/state"
)

// newStore returns the shared state of one pool: in memory (nothing shared)
// or Redis.
func newStore(c config.Config, pool string, opt Options, log *slog.Logger) (state.Store, error) {
	if c.State.Backend != "redis" {
		return state.NewMemory(), nil
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	pw, err := c.RedisPassword(getenv)
	if err != nil {
		return nil, err
	}
	spw, err := c.SentinelPassword(getenv)
	if err != nil {
		return nil, err
	}
	tc, err := c.RedisTLS()
	if err != nil {
		return nil, err
	}
	keys, err := c.RedisRecordKeys()
	if err != nil {
		return nil, err
	}
	r := c.State.Redis
	ro := state.RedisOptions{
		Addrs: r.Addrs, MasterName: r.MasterName, Username: r.Username, Password: pw, DB: r.DB,
		SentinelUsername: r.SentinelUsername, SentinelPassword: spw, TLS: tc,
		Prefix: r.KeyPrefix, Pool: pool, Replica: opt.Replica, Logger: log, RecordKeys: keys,
	}
	st, err := state.NewRedis(ro)
	if err != nil {
		return nil, fmt.Errorf("redis state: %w", err)
	}
	return st, nil
}

// newCoordinator returns the Coordinator of pool p over its store: the
// configured heartbeat, migration leases of two ticks.
func newCoordinator(c config.Config, p *Pool, tick time.Duration, now func() time.Time) (*coord.Coordinator, error) {
	co, err := coord.New(p.store, p.sched, coord.Options{
		Heartbeat: c.State.Redis.Heartbeat,
		LeaseTTL:  2 * tick,
		Now:       now,
		Logger:    p.m.log.With("pool", p.name),
	})
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", p.name, err)
	}
	return co, nil
}
