package state

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// RedisOptions configures NewRedis. Zero values mean the defaults written
// next to each field.
type RedisOptions struct {
	// Addrs are the servers: one for a single server, several for a
	// Cluster, or the Sentinels when MasterName is set.
	Addrs []string
	// MasterName selects Sentinel mode: the name of the monitored primary.
	MasterName         string
	Username, Password string
	DB                 int
	TLS                *tls.Config

	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// (with MasterName).
	SentinelUsername, SentinelPassword string
	// Prefix starts every key (default "dualmap").
	Prefix string
	// Pool names the pool (default "default"). All keys of a pool share
	// the hash tag {Prefix:Pool}, so they live in one Cluster slot.
	Pool string
	// Replica is this replica's unique id (default hostname-pid-random).
	Replica string
	// Flush is the dispatch batching period (default 10ms).
	Flush time.Duration
	// StreamMaxLen caps the dispatch stream, in entries (default 200000;
	// approximate trimming).
	StreamMaxLen int64
	// Buffer bounds the dispatch records waiting to be published, in
	// blocks, each record counting one more (default 1<<20, about 8 MiB).
	Buffer int
	// Logger receives outage and recovery messages (default slog.Default()).
	Logger *slog.Logger

	// Everything Redis returns is untrusted (see the package doc, Limits).
	// MaxReplyBytes bounds one bulk string (and one simple line) of a reply
	// (default 16 MiB); MaxReplyElements bounds the values the aggregates
	// of a reply announce and have not yet delivered (default 1<<20). A
	// reply beyond either closes the connection before anything is
	// allocated for it.
	MaxReplyBytes, MaxReplyElements int64
	// MaxReplyTotal bounds the sum of the bulk strings of one reply
	// (default 128 MiB: an XREAD of 256 of the largest stream entries this
	// package writes, 512 KiB each).
	MaxReplyTotal int64
	// MaxSplits bounds the key-depth table imported from T:kd (default
	// 4096, the scheduler's default MaxSplits: use the same value);
	// MaxKeyDepthBytes bounds its encoded size (default 16 bytes per
	// split plus 4 KiB). A larger value is not read.
	MaxSplits, MaxKeyDepthBytes int
	// MaxLoadRequests and MaxLoadTokens bound each field of another
	// replica's load on one instance (requests: queued, running; tokens:
	// queued, pending). Larger values are clamped (default 1<<16 requests
	// and 1<<24 tokens, beyond what one instance holds).
	MaxLoadRequests, MaxLoadTokens int
	// MaxStateBytes bounds another replica's encoded state
	// (T:state:<replica>); a larger one is not used (default 1 MiB, about
	// 20,000 instances).
	MaxStateBytes int
	// MaxReplicas bounds the other replicas whose load is read each
	// heartbeat, the most recent first (default 1024).
	MaxReplicas int

	// RecordKeys sign and check the replicas' states (sign.go): the first
	// signs this replica's, any of them opens another's (at most
	// MaxRecordKeys, each at least MinRecordKeyBytes). Nil: states are
	// neither signed nor checked.
	RecordKeys [][]byte
	// RecordMaxAge is, with RecordKeys, how far from now another replica's
	// state may have been written and still count: about the heartbeat's
	// TTL plus the clocks' difference (default 30s).
	RecordMaxAge time.Duration
}

// Defaults.
const (
	DefaultPrefix       = "dualmap"
	DefaultPool         = "default"
	DefaultFlush        = 10 * time.Millisecond
	DefaultStreamMaxLen = 200_000
	DefaultBuffer       = 1 << 20

	DefaultMaxReplyBytes    = 16 << 20
	DefaultMaxReplyElements = 1 << 20
	DefaultMaxReplyTotal    = 128 << 20
	DefaultMaxSplits        = 4096
	DefaultMaxLoadRequests  = 1 << 16
	DefaultMaxLoadTokens    = 1 << 24
	DefaultMaxStateBytes    = 1 << 20
	DefaultMaxReplicas      = 1024
	DefaultRecordMaxAge     = 30 * time.Second
)

func (o RedisOptions) withDefaults() RedisOptions {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Pool == "" {
		o.Pool = DefaultPool
	}
	if o.Replica == "" {
		o.Replica = defaultReplicaID()
	}
	if o.Flush == 0 {
		o.Flush = DefaultFlush
	}
	if o.StreamMaxLen == 0 {
		o.StreamMaxLen = DefaultStreamMaxLen
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxReplyBytes == 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if o.MaxReplyElements == 0 {
		o.MaxReplyElements = DefaultMaxReplyElements
	}
	if o.MaxReplyTotal == 0 {
		o.MaxReplyTotal = max(DefaultMaxReplyTotal, o.MaxReplyBytes)
	}
	if o.MaxSplits == 0 {
		o.MaxSplits = DefaultMaxSplits
	}
	if o.MaxKeyDepthBytes == 0 {
		o.MaxKeyDepthBytes = 16*o.MaxSplits + 4096
	}
	if o.MaxLoadRequests == 0 {
		o.MaxLoadRequests = DefaultMaxLoadRequests
	}
	if o.MaxLoadTokens == 0 {
		o.MaxLoadTokens = DefaultMaxLoadTokens
	}
	if o.MaxReplicas == 0 {
		o.MaxReplicas = DefaultMaxReplicas
	}
	if o.RecordMaxAge == 0 {
		o.RecordMaxAge = DefaultRecordMaxAge
	}
	if o.MaxStateBytes == 0 {
		o.MaxStateBytes = min(DefaultMaxStateBytes, int(o.MaxReplyBytes)-1)
	}
	return o
}

// validate reports the first unusable field of o (after defaults).
func (o RedisOptions) validate() error {
	switch {
	case len(o.Addrs) == 0:
		return fmt.Errorf("%w: no Addrs", ErrInvalidOptions)
	case strings.ContainsAny(o.Prefix+o.Pool, "{}"):
		return fmt.Errorf("%w: Prefix and Pool must not contain braces (they form the hash tag), got %q and %q", ErrInvalidOptions, o.Prefix, o.Pool)
	case !utf8.ValidString(o.Replica):
		return fmt.Errorf("%w: Replica must be valid UTF-8, got %q", ErrInvalidOptions, o.Replica)
	case o.Flush < time.Millisecond:
		return fmt.Errorf("%w: Flush must be >= 1ms, got %v", ErrInvalidOptions, o.Flush)
	case o.StreamMaxLen < 1:
		return fmt.Errorf("%w: StreamMaxLen must be >= 1, got %d", ErrInvalidOptions, o.StreamMaxLen)
	case o.Buffer < 1:
		return fmt.Errorf("%w: Buffer must be >= 1, got %d", ErrInvalidOptions, o.Buffer)
	case o.MaxReplyBytes < 64 || o.MaxReplyBytes > 1<<40:
		return fmt.Errorf("%w: MaxReplyBytes must be in [64, 1<<40], got %d", ErrInvalidOptions, o.MaxReplyBytes)
	case o.MaxReplyTotal < o.MaxReplyBytes || o.MaxReplyTotal > 1<<50:
		return fmt.Errorf("%w: MaxReplyTotal must be in [MaxReplyBytes, 1<<50], got %d", ErrInvalidOptions, o.MaxReplyTotal)
	case o.MaxReplyElements < 64 || o.MaxReplyElements > 1<<40:
		return fmt.Errorf("%w: MaxReplyElements must be in [64, 1<<40], got %d", ErrInvalidOptions, o.MaxReplyElements)
	case o.MaxSplits < 0 || o.MaxKeyDepthBytes < 1 || int64(o.MaxKeyDepthBytes) > o.MaxReplyBytes:
		return fmt.Errorf("%w: MaxSplits must be >= 0 and MaxKeyDepthBytes in [1, MaxReplyBytes], got %d and %d", ErrInvalidOptions, o.MaxSplits, o.MaxKeyDepthBytes)
	case o.MaxReplicas < 1:
		return fmt.Errorf("%w: MaxReplicas must be >= 1, got %d", ErrInvalidOptions, o.MaxReplicas)
	case o.MaxLoadRequests < 1 || o.MaxLoadTokens < 1:
		return fmt.Errorf("%w: MaxLoadRequests and MaxLoadTokens must be >= 1, got %d and %d", ErrInvalidOptions, o.MaxLoadRequests, o.MaxLoadTokens)
	case o.MaxStateBytes < 1 || int64(o.MaxStateBytes) >= o.MaxReplyBytes:
		return fmt.Errorf("%w: MaxStateBytes must be in [1, MaxReplyBytes), got %d", ErrInvalidOptions, o.MaxStateBytes)
	case len(o.RecordKeys) > MaxRecordKeys:
		return fmt.Errorf("%w: at most %d RecordKeys, got %d", ErrInvalidOptions, MaxRecordKeys, len(o.RecordKeys))
	case o.RecordMaxAge < 0:
		return fmt.Errorf("%w: RecordMaxAge must be >= 0, got %v", ErrInvalidOptions, o.RecordMaxAge)
	case o.DB < 0:
		return fmt.Errorf("%w: DB must be >= 0, got %d", ErrInvalidOptions, o.DB)
	}
	for i, k := range o.RecordKeys {
		if len(k) < MinRecordKeyBytes {
			return fmt.Errorf("%w: RecordKeys[%d] has %d bytes, want at least %d", ErrInvalidOptions, i, len(k), MinRecordKeyBytes)
		}
	}
	return nil
}

// defaultReplicaID is hostname-pid-random: unique across restarts and
// across replicas sharing a host.
func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "replica"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
