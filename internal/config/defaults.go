package config

import (
	"net"
	"time"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/scheduler"
)

// Defaults, written once. The settings a pool hands to its scheduler
// (policy, candidates, cache_tokens, per_token_seconds, slo.default and the
// queue's order, late_requests and late_idle_running) take the scheduler's
// defaults, scheduler.DefaultConfig; the constants here are the router's
// own, where it differs from the scheduler or the scheduler has none.
const (
	DefaultGRPC  = "127.0.0.1:9002"
	DefaultAdmin = "127.0.0.1:9090"
	// The gRPC server's bounds (see GRPC).
	DefaultMaxConcurrentStreams  = 1024
	DefaultKeepaliveTime         = time.Minute
	DefaultKeepaliveTimeout      = 20 * time.Second
	DefaultMinPingInterval       = 10 * time.Second
	DefaultMaxConnectionAge      = time.Hour
	DefaultMaxConnectionAgeGrace = 10 * time.Minute
	// DefaultHealthPort is the gRPC health port of an endpoint picker.
	DefaultHealthPort = "9003"
	// DefaultBlockSize is vLLM's KV-cache block size: the router hashes
	// prompts in the engines' blocks (the scheduler's own default, 512
	// tokens, is the Mooncake traces' block).
	DefaultBlockSize    = tokenize.DefaultBlockSize
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxQueueWait bounds a wait in the router queue (the
	// scheduler's own default is no bound).
	DefaultMaxQueueWait = 30 * time.Second
	DefaultHeader       = "x-gateway-destination-endpoint"
	DefaultSLOHeader    = "x-dualmap-slo"
	DefaultPriorityHdr  = "x-dualmap-priority"
	ModeOverrideHost    = "override-host"
	ModeOriginalDst     = "original-dst"
)

// Defaults of the bounds on the router's memory across streams.
const (
	DefaultMaxStreams       = 4096
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultBodyTimeout bounds the arrival of a request body once its
	// headers have come (limits.body_timeout).
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxWatchStreams caps the gRPC health Watch streams
	// (grpc.health.max_watch_streams).
	DefaultMaxWatchStreams = 1024
	// DefaultFirstMessageTimeout bounds the wait for a stream's first
	// message (limits.first_message_timeout).
	DefaultFirstMessageTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds the wait for a routed stream's next
	// message (limits.idle_timeout): above the stream_idle_timeout (300s)
	// of the shipped Envoy configs.
	DefaultIdleTimeout = 330 * time.Second
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	sd := scheduler.DefaultConfig()
	if c.Listen.GRPC == "" {
		c.Listen.GRPC = DefaultGRPC
	}
	if c.Listen.Admin == "" {
		c.Listen.Admin = DefaultAdmin
	}
	g := &c.GRPC
	if g.MaxConcurrentStreams == 0 {
		g.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if g.KeepaliveTime == 0 {
		g.KeepaliveTime = DefaultKeepaliveTime
	}
	if g.KeepaliveTimeout == 0 {
		g.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if g.MinPingInterval == 0 {
		g.MinPingInterval = DefaultMinPingInterval
	}
	if g.MaxConnectionAge == 0 {
		g.MaxConnectionAge = DefaultMaxConnectionAge
	}
	if g.MaxConnectionAgeGrace == 0 {
		g.MaxConnectionAgeGrace = DefaultMaxConnectionAgeGrace
	}
	if g.TLS.Mode == "" {
		g.TLS.Mode = TLSOff
		if g.TLS.CertFile != "" || g.TLS.KeyFile != "" {
			g.TLS.Mode = TLSFiles
		}
	}
	if g.Health.MaxWatchStreams == 0 {
		g.Health.MaxWatchStreams = DefaultMaxWatchStreams
	}
	if g.Health.Enabled && g.Health.Listen == "" {
		host, _, err := net.SplitHostPort(c.Listen.GRPC)
		if err == nil {
			g.Health.Listen = net.JoinHostPort(host, DefaultHealthPort)
		}
	}
	if c.Admin.TokenEnv == "" {
		c.Admin.TokenEnv = "DUALMAP_ADMIN_TOKEN"
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
			p.CacheTokens = sd.CacheTokens
		}
		if p.PerTokenSeconds == 0 {
			p.PerTokenSeconds = sd.Cost.PerToken
		}
		if p.Candidates == 0 {
			p.Candidates = sd.Candidates
		}
		if p.Policy.Name == "" {
			p.Policy.Name = sd.Policy
		}
		if p.Metrics.Enabled == nil {
			off := false
			p.Metrics.Enabled = &off
		}
		if p.Metrics.LearnLimit == nil {
			on := true
			p.Metrics.LearnLimit = &on
		}
		if p.Metrics.Path == "" {
			p.Metrics.Path = "/metrics"
		}
		if p.Metrics.Interval == 0 {
			p.Metrics.Interval = time.Second
		}
		p.PD = p.PD.withDefaults()
		p.KVEvents = p.KVEvents.withDefaults()
		if p.DNS != nil && p.DNS.Interval == 0 {
			d := *p.DNS
			d.Interval = 10 * time.Second
			p.DNS = &d
		}
		if p.XDS != nil {
			x := p.XDS.withDefaults()
			p.XDS = &x
		}
		pools[i] = p
	}
	c.Pools = pools
	if c.SLO.Default == 0 {
		c.SLO.Default = sd.SLO
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.QueueSLOShare == 0 {
		c.Limits.QueueSLOShare = sd.Queue.SLOShare
	}
	if c.Limits.MaxQueueWait == 0 {
		c.Limits.MaxQueueWait = DefaultMaxQueueWait
	}
	if c.Limits.QueueOrder == "" {
		c.Limits.QueueOrder = sd.Queue.Order
	}
	if c.Limits.LateRequests == "" {
		c.Limits.LateRequests = sd.Queue.Late
	}
	if c.Limits.LateIdleRunning == 0 {
		c.Limits.LateIdleRunning = sd.Queue.IdleRunning
	}
	if c.Limits.MaxStreams == 0 {
		c.Limits.MaxStreams = DefaultMaxStreams
	}
	if c.Limits.MaxBufferedBytes == 0 {
		c.Limits.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.Limits.MaxBufferedBytesPerClient == 0 {
		c.Limits.MaxBufferedBytesPerClient = max(c.Limits.MaxBodyBytes, c.Limits.MaxBufferedBytes/8)
	}
	if c.Limits.BodyTimeout == 0 {
		c.Limits.BodyTimeout = DefaultBodyTimeout
	}
	if c.Limits.FirstMessageTimeout == 0 {
		c.Limits.FirstMessageTimeout = DefaultFirstMessageTimeout
	}
	if c.Limits.IdleTimeout == 0 {
		c.Limits.IdleTimeout = DefaultIdleTimeout
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
	if c.Routing.PriorityHeader == "" {
		c.Routing.PriorityHeader = DefaultPriorityHdr
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
	if c.Health.Consecutive5xx == 0 {
		c.Health.Consecutive5xx = 3
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
	if c.State.Redis.SentinelPasswordEnv == "" {
		c.State.Redis.SentinelPasswordEnv = "DUALMAP_REDIS_SENTINEL_PASSWORD"
	}
	if r := &c.State.Redis; r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSKeyFile != "" || r.TLSServerName != "" {
		r.TLS = true
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

func (k KVEvents) withDefaults() KVEvents {
	d := kvevents.Defaults()
	if k.Mode == "" {
		k.Mode = d.Mode
	}
	if k.Port == 0 {
		k.Port = d.Port
	}
	if k.Ranks == 0 {
		k.Ranks = d.Ranks
	}
	if k.MaxBlocks == 0 {
		k.MaxBlocks = d.MaxBlocks
	}
	if k.ReplayTimeout == 0 {
		k.ReplayTimeout = d.ReplayTimeout
	}
	if k.Queue == 0 {
		k.Queue = d.Queue
	}
	return k
}

// KVEventsConfig is pool pc's KV-event subscription as the subscriber
// takes it (pool, block size and the fields above; logger, metrics and
// clock are the caller's).
func (pc Pool) KVEventsConfig() kvevents.Config {
	k := pc.KVEvents
	return kvevents.Config{Pool: pc.Name, Mode: k.Mode, Port: k.Port, PortOffset: k.PortOffset, Ranks: k.Ranks, Bind: k.Bind,
		ReplayPort: k.ReplayPort, ReplayOffset: k.ReplayOffset,
		Topic: k.Topic, BlockSize: pc.BlockSize, MaxBlocks: k.MaxBlocks, ReplayTimeout: k.ReplayTimeout, Queue: k.Queue}
}
