// Package config is the router's configuration: one YAML file decoded into
// plain structs, with defaults written once (WithDefaults; those of the
// settings a pool hands to its scheduler come from scheduler.DefaultConfig),
// strict validation whose errors name the offending key, and environment
// overrides for secrets. It is for `dualmap serve` and `dualmap config`; it
// holds no running state.
package config

import (
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Config is the whole file. The zero value of a field means its default.
type Config struct {
	Listen  Listen  `yaml:"listen"`
	GRPC    GRPC    `yaml:"grpc"`
	Admin   Admin   `yaml:"admin"`
	Pools   []Pool  `yaml:"pools"`
	SLO     SLO     `yaml:"slo"`
	Limits  Limits  `yaml:"limits"`
	Routing Routing `yaml:"routing"`
	// Objectives map the inference objective a request names (header
	// x-llm-d-inference-objective, or the older
	// x-gateway-inference-objective) to its priority, as a Gateway API
	// Inference Extension InferenceObjective does: a higher priority waits
	// less in the router queues; a negative one is sheddable (429 instead
	// of waiting). An objective not listed, or none, is priority 0.
	Objectives map[string]int `yaml:"objectives"`
	Health     Health         `yaml:"health"`
	State      State          `yaml:"state"`
	Log        Log            `yaml:"log"`
	Tracing    Tracing        `yaml:"tracing"`
}

// Listen are the addresses the router serves on. Both default to loopback:
// Envoy as a sidecar (or on the same host) reaches the router there, and
// nothing else can. Give ":9002" (every interface) for Envoy elsewhere.
type Listen struct {
	GRPC  string `yaml:"grpc"`  // ext_proc gRPC (default "127.0.0.1:9002")
	Admin string `yaml:"admin"` // /healthz, /readyz, /metrics, /debug/* (default "127.0.0.1:9090")
}

// GRPC bounds the connections of the ext_proc gRPC server. Every HTTP
// request Envoy proxies holds one stream for its whole life, response
// included.
type GRPC struct {
	// MaxConcurrentStreams caps the streams of one connection (default
	// 1024, Envoy's own circuit-breaker default); Envoy opens another
	// connection past it.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// KeepaliveTime: the server pings a connection idle this long (default
	// 1m), and closes it when no answer comes within KeepaliveTimeout
	// (default 20s).
	KeepaliveTime    time.Duration `yaml:"keepalive_time"`
	KeepaliveTimeout time.Duration `yaml:"keepalive_timeout"`
	// MinPingInterval: a client that pings more often than this is
	// disconnected (default 10s).
	MinPingInterval time.Duration `yaml:"min_ping_interval"`
	// MaxConnectionAge: a connection is asked to go away (GOAWAY) after
	// this long (default 1h; negative: never), and its streams then have
	// MaxConnectionAgeGrace (default 10m) to finish before they are cut:
	// keep it above the longest generation.
	MaxConnectionAge      time.Duration `yaml:"max_connection_age"`
	MaxConnectionAgeGrace time.Duration `yaml:"max_connection_age_grace"`
	// TLS of the ext_proc listener (default off: plaintext, for an Envoy
	// sidecar on loopback).
	TLS TLS `yaml:"tls"`
	// Health serves gRPC health (grpc.health.v1) on a port of its own, in
	// plaintext, as gateways and GKE expect of an endpoint picker (port
	// 9003). The ext_proc listener answers the same health service either
	// way.
	Health GRPCHealth `yaml:"health"`
}

// TLS modes of the ext_proc listener.
const (
	TLSOff        = "off"
	TLSSelfSigned = "self-signed"
	TLSFiles      = "files"
)

// TLS secures the ext_proc listener. Gateways reach an endpoint picker
// over TLS without verifying its certificate, so "self-signed" (an ECDSA
// certificate made at start, held in memory) is enough for them; "files"
// serves a certificate and key from PEM files, re-read when they change
// (a bad new pair keeps the old one). ClientCAFile (PEM) turns on mutual
// TLS with either mode: clients must present a certificate it signed.
type TLS struct {
	// Mode is "off" (default), "self-signed" or "files" (the default when
	// cert_file is given).
	Mode         string `yaml:"mode"`
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// GRPCHealth is the gRPC health port. Its services: "liveness" (SERVING
// while the process runs), "readiness", "" and
// "envoy.service.ext_proc.v3.ExternalProcessor" (SERVING when every pool
// has a ready instance; Redis is no part of it: a replica routes on its
// own view during an outage), and "dualmap.state" (SERVING while every
// pool's shared state is synced: Redis answers).
type GRPCHealth struct {
	Enabled bool `yaml:"enabled"` // default off
	// Listen defaults to the host of listen.grpc with port 9003.
	Listen string `yaml:"listen"`
	// MaxWatchStreams caps the health Watch streams open at once, on the
	// health port and the ext_proc listener together; one more is refused
	// with RESOURCE_EXHAUSTED (default 1024; Check is not bounded: it
	// holds nothing).
	MaxWatchStreams int `yaml:"max_watch_streams"`
}

// Admin guards the admin HTTP server's /debug/* endpoints (pool and
// instance state). /healthz, /readyz and /metrics stay open.
type Admin struct {
	// The bearer token is read from the file TokenFile or else the
	// environment variable TokenEnv (default DUALMAP_ADMIN_TOKEN); never
	// from this file. No token: /debug/* is open to whoever reaches the
	// admin port.
	TokenFile string `yaml:"token_file"`
	TokenEnv  string `yaml:"token_env"`
}

// Pool is one set of interchangeable model-server instances.
type Pool struct {
	Name string `yaml:"name"`
	// Models are the model names this pool serves; "*" makes it the
	// default pool for unknown or missing model names.
	Models    []string   `yaml:"models"`
	Instances []Instance `yaml:"instances"`
	// DNS, instead of (or on top of) a static list: a name re-resolved
	// every Interval, each address with Port.
	DNS *DNS `yaml:"dns"`
	// XDS, instead of (or on top of) a static list: the endpoints of one
	// cluster from an xDS management server (EDS), the same list Envoy
	// routes to.
	XDS       *XDS   `yaml:"xds"`
	Tokenizer string `yaml:"tokenizer"`  // tokenizer.json path; "" = byte approximation
	BlockSize int    `yaml:"block_size"` // tokens per hash block (default 16)
	Policy    Policy `yaml:"policy"`
	// CacheTokens is each instance's KV-cache capacity in tokens unless the
	// instance says otherwise (default the scheduler's, 1,200,000).
	CacheTokens int `yaml:"cache_tokens"`
	// MaxSeqs is the requests each engine runs at once (vLLM's and the
	// llm-d simulator's --max-num-seqs, SGLang's --max-running-requests,
	// llama.cpp's --parallel), for the TTFT estimate's wait for a sequence
	// slot from the first request on (default 0: 256 until the polled
	// metrics show the limit, pools[].metrics.learn_limit).
	MaxSeqs int `yaml:"max_seqs"`
	// PerTokenSeconds is the prior prefill cost per token, refined online
	// (default the scheduler's, 0.00016).
	PerTokenSeconds float64 `yaml:"per_token_seconds"`
	// Candidates is the number of hash rings, 1 to 4 (default the
	// scheduler's, 4).
	Candidates int `yaml:"candidates"`
	// Metrics polls each instance's Prometheus endpoint (vLLM's, SGLang's
	// and llama.cpp's queue and running gauges and KV use). By default
	// (learn_limit) only the engine's running limit (max_num_seqs) is
	// learned from it, for the TTFT estimate's wait for a sequence slot; an
	// endpoint that does not answer leaves the prior limit (256). enabled
	// also feeds the gauges into the estimates and admission as a second
	// load signal. That is off by default: on llm-d's simulator and on
	// `dualmap engine` it cost TTFT p90/p99 (up to a third) and, with three
	// replicas, 4-6 points of hit rate, and gained nothing beyond the runs'
	// spread (docs/evaluation.md, "Polling on against off, measured again").
	Metrics Metrics `yaml:"metrics"`
	// ChatTemplate is how chats are rendered before they are tokenized:
	// "auto" (the default, also for "") the model's own chat template,
	// from chat_template.jinja or tokenizer_config.json beside Tokenizer,
	// as vLLM and SGLang render, or the builtin rendering when there is
	// none; "builtin" the router's own approximate rendering; a path, a
	// tokenizer_config.json (a name ending in .json) or a Jinja template.
	ChatTemplate string `yaml:"chat_template"`
	// PD makes the pool a prefill/decode pool (pd.go): every request is
	// pinned to a decode instance and, when remote prefill pays, names a
	// prefill instance in a header the decode side's P/D sidecar reads.
	// Unset: every instance does both, and instances[].role must be both.
	PD *PD `yaml:"pd"`
	// KVEvents subscribes to the instances' KV-cache events (vLLM's
	// --kv-events-config, SGLang's --kv-events-config, llm-d's simulator):
	// while an instance's stream is whole its cache index is what the
	// engine reports instead of the router's prediction (docs/kv-events.md).
	KVEvents KVEvents `yaml:"kv_events"`
}

// KVEvents configures a pool's KV-event subscription (ZeroMQ).
type KVEvents struct {
	Enabled bool `yaml:"enabled"`
	// Mode is connect (dial each instance's publisher at its IP and Port:
	// engines that bind, vLLM's default tcp://*:5557) or bind (listen on
	// Bind for publishers that dial, each naming its instance in its
	// topic kv@<ip>:<port>@<model>, as llm-d's simulator does).
	Mode string `yaml:"mode"` // default connect
	// Port is the engines' publisher port; data-parallel rank r publishes
	// on port + r.
	Port int `yaml:"port"` // default 5557
	// PortOffset, when not 0, puts each instance's publisher on the
	// instance's own port plus this offset instead of port (several
	// engines on one host).
	PortOffset int `yaml:"port_offset"`
	Ranks      int `yaml:"ranks"` // data-parallel ranks per instance (default 1)
	// Bind is the endpoint bind mode listens on, e.g. tcp://0.0.0.0:5557.
	Bind string `yaml:"bind"`
	// ReplayPort is the engines' replay port (vLLM's replay_endpoint),
	// rank r on replay_port + r; 0: none (a gap makes the instance use
	// the predicted index until its engine clears or restarts).
	ReplayPort int `yaml:"replay_port"`
	// ReplayOffset, when not 0, puts each instance's replay socket on the
	// instance's own port plus this offset instead of replay_port.
	ReplayOffset int `yaml:"replay_offset"`
	// Topic is the subscription's topic prefix ("" every topic).
	Topic string `yaml:"topic"`
	// MaxBlocks bounds the blocks held per instance and rank.
	MaxBlocks     int           `yaml:"max_blocks"`     // default 4194304
	ReplayTimeout time.Duration `yaml:"replay_timeout"` // default 2s
	// Queue is the number of messages buffered between the sockets and
	// the index.
	Queue int `yaml:"queue"` // default 1024
}

// Metrics configures polling of the instances' own metrics.
type Metrics struct {
	// Enabled feeds the engines' reported queues, running requests and KV
	// memory into the estimates and admission.
	Enabled *bool `yaml:"enabled"` // default false
	// LearnLimit polls them while Enabled is false only to learn each
	// engine's running limit (vLLM's max_num_seqs) from a lasting queue, for
	// the estimate's wait for a sequence slot; while none is known, a queue
	// a poll shows is confirmed by another poll 250ms later.
	LearnLimit *bool         `yaml:"learn_limit"` // default true
	Path       string        `yaml:"path"`        // default /metrics
	Interval   time.Duration `yaml:"interval"`    // default 1s
}

// Instance is one model server.
type Instance struct {
	Address     string  `yaml:"address"` // IP:port, as Envoy's endpoint
	Weight      float64 `yaml:"weight"`
	CacheTokens int     `yaml:"cache_tokens"`
	// Role is what the instance does in a P/D pool (pools[].pd): prefill,
	// decode or both (default both).
	Role string `yaml:"role"`
}

// DNS is a name whose A/AAAA records are the pool's instances.
type DNS struct {
	Name     string        `yaml:"name"`
	Port     int           `yaml:"port"`
	Interval time.Duration `yaml:"interval"` // default 10s
	// Role is the role of every address the name resolves to in a P/D
	// pool (pools[].pd): prefill, decode or both (default both). Give the
	// other role as static instances or through xDS endpoint metadata.
	Role string `yaml:"role"`
}

// Policy selects the routing policy and its parameters.
type Policy struct {
	Name   string           `yaml:"name"` // default the scheduler's, "dualmap"
	Params scheduler.Params `yaml:"params"`
}

// SLO are the TTFT objectives.
type SLO struct {
	Default time.Duration `yaml:"default"` // default the scheduler's, 5s
	// Classes name objectives a request can ask for with the SLO header
	// (e.g. interactive: 2s, batch: 60s).
	Classes map[string]time.Duration `yaml:"classes"`
}

// Limits bound what one request may cost.
type Limits struct {
	MaxBodyBytes int `yaml:"max_body_bytes"` // default 4 MiB
	// QueueBudgetTokens is the router queue's admission rule: 0 (default)
	// the adaptive rule, a request waits in the router only while its
	// engine queues requests at its running limit (polled metrics) or while
	// the prefill work ahead there, at the TTFT cost per token ahead the
	// router learns, would take more than queue_slo_share of slo.default;
	// until then every request is dispatched at once. N > 0: a fixed
	// budget, the pending prefill tokens an instance may hold, counting
	// what the other replicas last reported, before requests wait.
	// Negative: no router queue.
	QueueBudgetTokens int `yaml:"queue_budget_tokens"`
	// QueueSLOShare is the adaptive rule's share of slo.default that the
	// work ahead on an instance may take (default 0.125; in (0, 1]).
	QueueSLOShare float64 `yaml:"queue_slo_share"`
	// MaxQueueWait bounds a wait in the router queue; past it the request
	// gets 429 with Retry-After (default 30s). Envoy's ext_proc
	// message_timeout must be above it.
	MaxQueueWait time.Duration `yaml:"max_queue_wait"`
	// QueueOrder is the router queue's order: "deadline" (default: requests
	// that can still meet their SLO first) or "cache" (cached tokens plus
	// aging only).
	QueueOrder string `yaml:"queue_order"`
	// LateRequests is what a deadline-ordered queue does with a request that
	// can no longer meet its SLO: "idle" (default: dispatch it only to an
	// instance with no prefill pending), "serve" (dispatch it whenever
	// nothing on time waits) or "reject" (as "idle", but 503 as soon as it
	// could not make its SLO even on an idle instance, so the client can
	// retry elsewhere at once).
	LateRequests string `yaml:"late_requests"`
	// LateIdleRunning: under "idle", an instance with fewer requests in
	// flight than this and no prefill pending counts as idle (default 8).
	LateIdleRunning int `yaml:"late_idle_running"`
	// MaxRunning is how many requests an instance runs at once (vLLM's
	// --max-num-seqs, SGLang's --max-running-requests): requests beyond it
	// wait in the router, where they can still be reordered or migrated,
	// rather than in the engine's queue (default 0: not known, no limit).
	MaxRunning int `yaml:"max_running"`

	// Bounds on the router's own memory, across all ext_proc streams.

	// MaxStreams caps the ext_proc streams (HTTP requests, for their whole
	// life) served at once; a stream over it gets 429 (default 4096).
	MaxStreams int `yaml:"max_streams"`
	// MaxBufferedBytes caps the request body bytes all streams hold at once;
	// a body that would go over it gets 429 (default 256 MiB; at least
	// max_body_bytes).
	MaxBufferedBytes int `yaml:"max_buffered_bytes"`
	// MaxBufferedBytesPerClient caps the request body bytes the streams of
	// one client (its address, the source.address attribute Envoy sends
	// when its ext_proc filter lists it in request_attributes) hold at
	// once; a body that would go over it gets 429, so a few clients cannot
	// take the whole budget (default max_buffered_bytes / 8, at least
	// max_body_bytes; negative: no per-client bound). Streams without the
	// attribute are bounded by max_buffered_bytes and body_timeout only.
	MaxBufferedBytesPerClient int `yaml:"max_buffered_bytes_per_client"`
	// BodyTimeout bounds how long a request body may take to arrive once
	// its headers have: past it the request gets 408 and the stream ends,
	// giving back what it held (default 30s; negative: no bound). Keep
	// Envoy's request_timeout above it plus max_queue_wait.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// FirstMessageTimeout bounds how long an admitted stream may take to
	// send its first message (Envoy sends the request headers as it opens
	// the stream); past it the stream ends with DEADLINE_EXCEEDED and its
	// slot of max_streams is free again (default 10s; negative: no bound).
	FirstMessageTimeout time.Duration `yaml:"first_message_timeout"`
	// IdleTimeout bounds the wait for a stream's next message once its
	// request has gone upstream (the response headers, each response
	// chunk): past it the stream ends with DEADLINE_EXCEEDED, releasing
	// its slot and load (default 5m30s, above the stream_idle_timeout of
	// 300s in the shipped Envoy configs, which ends an idle request first;
	// negative: no bound).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// Routing says how decisions reach Envoy.
type Routing struct {
	// Header carries the decision (default x-gateway-destination-endpoint).
	Header string `yaml:"header"`
	// Mode: "override-host" (default: "primary,fallback", for the
	// override_host load-balancing policy, which retries on the fallback)
	// or "original-dst" (a single endpoint, for an ORIGINAL_DST cluster,
	// which does not understand a list: the mode for gateways such as
	// Envoy AI Gateway). Either way the header and the envoy.lb dynamic
	// metadata carry identical values.
	Mode string `yaml:"mode"`
	// DebugHeaders adds x-dualmap-instance, x-dualmap-reason and
	// x-dualmap-cached-tokens to responses: a debugging aid that tells any
	// client instance addresses and whether a prompt prefix (possibly
	// another user's) is cached. Off by default; never on for untrusted
	// clients.
	DebugHeaders bool `yaml:"debug_headers"`
	// ResponseBody says how Envoy's ext_proc filter sends response bodies:
	// "streamed" (default, response_body_mode: STREAMED) lets the router see
	// a stream's first token and its end; "none" (NONE) saves a gRPC round
	// trip per chunk but takes the response headers as the first token and
	// relies on the ext_proc stream's end for completion.
	ResponseBody string `yaml:"response_body"`
	// SLOHeader names the request header with an SLO class or a duration
	// (default x-dualmap-slo).
	SLOHeader string `yaml:"slo_header"`
	// SessionHeader names an optional request header whose value keys the
	// request instead of its prompt prefix (session affinity); "" = off.
	SessionHeader string `yaml:"session_header"`
	// PriorityHeader names the request header with a client's priority
	// (an integer, higher first; default x-dualmap-priority). It is read
	// only on routes whose Envoy settings allow it (client_priority).
	PriorityHeader string `yaml:"priority_header"`
}

// Health configures active health checks and passive failure handling.
type Health struct {
	Path     string        `yaml:"path"`     // default /health
	Interval time.Duration `yaml:"interval"` // default 5s
	Timeout  time.Duration `yaml:"timeout"`  // default 1s
	// Backoff is how long an instance that failed (5xx, connect error)
	// stays out before the health check may bring it back; doubles on
	// repeated failures up to MaxBackoff (defaults 2s and 60s).
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Consecutive5xx is how many 5xx answers in a row other than 502, 503
	// and 504 take an instance out (default 3; 1: the first). A 502, 503
	// or 504 (what a proxy answers when it cannot reach or hear from an
	// instance, or an engine that is not serving) and a request the proxy
	// had to send to the fallback take it out at once. An engine under load
	// can fail a single request with 500 (llm-d's vLLM simulator does),
	// and taking a busy instance out for its backoff throws away a share of
	// the pool's capacity and cache.
	Consecutive5xx int `yaml:"consecutive_5xx"`
}

// State selects where shared state lives.
type State struct {
	// Backend is "memory" (default: one replica, nothing shared) or
	// "redis" (several replicas share cache index, load and key depth).
	Backend string `yaml:"backend"`
	Redis   Redis  `yaml:"redis"`
}

// Redis is the connection to the shared state. Only hashes and numbers are
// stored, never prompt text.
type Redis struct {
	// Addrs: one address, several for a Cluster, or the Sentinels when
	// MasterName is set.
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Username   string   `yaml:"username"`
	// Password is read from the environment variable PasswordEnv (default
	// DUALMAP_REDIS_PASSWORD) or the file PasswordFile; never from this file.
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	// SentinelUsername and the Sentinel password (from
	// SentinelPasswordEnv, default DUALMAP_REDIS_SENTINEL_PASSWORD, or
	// SentinelPasswordFile) authenticate to the Sentinels, with MasterName.
	SentinelUsername     string `yaml:"sentinel_username"`
	SentinelPasswordEnv  string `yaml:"sentinel_password_env"`
	SentinelPasswordFile string `yaml:"sentinel_password_file"`
	DB                   int    `yaml:"db"`
	// TLS connects with TLS 1.2+, verifying the server against the
	// system's roots, or against TLSCAFile (PEM) when given. TLSCertFile
	// and TLSKeyFile (PEM, both or neither) are a client certificate;
	// TLSServerName overrides the name verified. Any tls_* key turns TLS
	// on.
	TLS           bool   `yaml:"tls"`
	TLSCAFile     string `yaml:"tls_ca_file"`
	TLSCertFile   string `yaml:"tls_cert_file"`
	TLSKeyFile    string `yaml:"tls_key_file"`
	TLSServerName string `yaml:"tls_server_name"`
	// KeyPrefix starts every key (default "dualmap"); each pool's keys
	// share the hash tag {prefix:pool}.
	KeyPrefix string `yaml:"key_prefix"`
	// Heartbeat is the load exchange period (default 100ms); same on every
	// replica. A replica silent for 3 heartbeats is ignored.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// RecordKeyFile names a file of record keys, one a line (at most 4,
	// each at least 16 bytes; e.g. a mounted Secret): the first signs this
	// replica's load record with an HMAC, any of them opens another's, and
	// records that do not open are not counted (default "": records are
	// neither signed nor checked). Read at start.
	RecordKeyFile string `yaml:"record_key_file"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info (default) | warn | error
	Format string `yaml:"format"` // text (default) | json
}

// On reports whether the instances' reported load is used.
func (m Metrics) On() bool { return m.Enabled != nil && *m.Enabled }

// Limit reports whether the instances' metrics are polled for their
// running limit alone (On is false).
func (m Metrics) Limit() bool { return !m.On() && (m.LearnLimit == nil || *m.LearnLimit) }
