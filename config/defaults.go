package config

import (
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Defaults, written once.
const (
	DefaultGRPC         = ":9002"
	DefaultAdmin        = ":9090"
	DefaultBlockSize    = 16
	DefaultCacheTokens  = 1_200_000
	DefaultPerToken     = 0.00016
	DefaultCandidates   = 4
	DefaultMaxBodyBytes = 4 << 20
	DefaultQueueBudget  = 20480
	DefaultHeader       = "x-gateway-destination-endpoint"
	DefaultSLOHeader    = "x-dualmap-slo"
	ModeOverrideHost    = "override-host"
	ModeOriginalDst     = "original-dst"
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Listen.GRPC == "" {
		c.Listen.GRPC = DefaultGRPC
	}
	if c.Listen.Admin == "" {
		c.Listen.Admin = DefaultAdmin
	}
	pools := make([]Pool, len(c.Pools))
	for i, p := range c.Pools {
		if p.Name == "" {
			p.Name = "default"
		}
		if len(p.Models) == 0 {
			p.Models = []string{"*"}
		}
		if p.BlockSize == 0 {
			p.BlockSize = DefaultBlockSize
		}
		if p.CacheTokens == 0 {
			p.CacheTokens = DefaultCacheTokens
		}
		if p.PerTokenSeconds == 0 {
			p.PerTokenSeconds = DefaultPerToken
		}
		if p.Candidates == 0 {
			p.Candidates = DefaultCandidates
		}
		if p.Policy.Name == "" {
			p.Policy.Name = "dualmap"
		}
		if p.Metrics.Path == "" {
			p.Metrics.Path = "/metrics"
		}
		if p.Metrics.Interval == 0 {
			p.Metrics.Interval = time.Second
		}
		if p.DNS != nil && p.DNS.Interval == 0 {
			d := *p.DNS
			d.Interval = 10 * time.Second
			p.DNS = &d
		}
		pools[i] = p
	}
	c.Pools = pools
	if c.SLO.Default == 0 {
		c.SLO.Default = 5 * time.Second
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.QueueBudgetTokens == 0 {
		c.Limits.QueueBudgetTokens = DefaultQueueBudget
	}
	if c.Limits.MaxQueueWait == 0 {
		c.Limits.MaxQueueWait = 30 * time.Second
	}
	if c.Limits.QueueOrder == "" {
		c.Limits.QueueOrder = scheduler.OrderDeadline
	}
	if c.Limits.LateRequests == "" {
		c.Limits.LateRequests = scheduler.LateIdle
	}
	if c.Limits.LateIdleRunning == 0 {
		c.Limits.LateIdleRunning = 8
	}
	if c.Routing.Header == "" {
		c.Routing.Header = DefaultHeader
	}
	if c.Routing.Mode == "" {
		c.Routing.Mode = ModeOverrideHost
	}
	if c.Routing.ResponseBody == "" {
		c.Routing.ResponseBody = "streamed"
	}
	if c.Routing.SLOHeader == "" {
		c.Routing.SLOHeader = DefaultSLOHeader
	}
	if c.Health.Path == "" {
		c.Health.Path = "/health"
	}
	if c.Health.Interval == 0 {
		c.Health.Interval = 5 * time.Second
	}
	if c.Health.Timeout == 0 {
		c.Health.Timeout = time.Second
	}
	if c.Health.Backoff == 0 {
		c.Health.Backoff = 2 * time.Second
	}
	if c.Health.MaxBackoff == 0 {
		c.Health.MaxBackoff = time.Minute
	}
	if c.State.Backend == "" {
		c.State.Backend = "memory"
	}
	if c.State.Redis.PasswordEnv == "" {
		c.State.Redis.PasswordEnv = "DUALMAP_REDIS_PASSWORD"
	}
	if c.State.Redis.KeyPrefix == "" {
		c.State.Redis.KeyPrefix = "dualmap"
	}
	if c.State.Redis.Heartbeat == 0 {
		c.State.Redis.Heartbeat = 100 * time.Millisecond
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	return c
}
