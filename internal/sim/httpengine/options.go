package httpengine

import (
	"errors"
	"fmt"
	"github.com/dualmap/dualmap/internal/kvevents"
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// Defaults for the zero fields of Options.
const (
	DefaultProfile      = "qwen2.5-7b-910b4"
	DefaultBlockSize    = tokenize.DefaultBlockSize // vLLM's, as the router's pools
	DefaultModel        = "dualmap-sim"
	DefaultTimeScale    = 1
	DefaultOutputTokens = 64
	DefaultName         = "engine"
	// DefaultKVTransferPerToken is llm-d's simulator's figure for an 8B
	// model on H100s (kv-cache-transfer-time-per-token), as package sim's.
	DefaultKVTransferPerToken = 3e-6
)

// Options configure a Server. Zero fields take the defaults above.
type Options struct {
	// Profile is the engine model; a zero Profile (no Name) means the
	// embedded DefaultProfile. Its BlockSize is replaced by BlockSize.
	Profile engine.Profile
	// BlockSize is the number of tokens per hash block of a prompt and per
	// cache block of the engine. It must match the router pool's
	// block_size for the router's cache estimate to agree with the engine.
	BlockSize int
	// Model is the model name listed by /v1/models and set as the
	// model_name label of the metrics. Requests may name any model; a
	// response reports the request's.
	Model string
	// TimeScale is simulated seconds per wall second: 10 runs ten times
	// faster than the profile. Must be positive and finite.
	TimeScale float64
	// OutputTokens is how many tokens a request generates unless its
	// max_tokens is lower (then max_tokens, finish_reason "length"). A
	// request with "ignore_eos": true and max_tokens generates exactly
	// max_tokens, as in vLLM.
	OutputTokens int

	// ErrorRate is the fraction of inference requests answered 500, from
	// 0 to 1; which ones is deterministic given Seed and arrival order.
	ErrorRate float64
	// AddedLatency is a wall delay before every response except
	// /admin/fault's.
	AddedLatency time.Duration
	// Seed seeds the choice of failed requests and the profile's prefill
	// noise.
	Seed uint64

	// KVTransferPerToken is the simulated seconds a decode leg waits per
	// prompt token whose KV it receives from a prefill instance (pd.go);
	// zero means DefaultKVTransferPerToken, negative none.
	KVTransferPerToken float64

	// Name names this instance (e.g. its address) in the x-engine-name
	// response header and the engine_name metrics label.
	Name string

	// Tracer, when not nil, records a span per inference request that
	// continues the W3C trace context of its headers (trace.go).
	Tracer trace.Tracer

	// KVEvents, when not nil, publishes the engine's KV-cache events
	// (kvevents.go); the caller owns and closes it.
	KVEvents *kvevents.Publisher
}

// withDefaults returns o with its zero fields filled in, or an error naming
// every invalid field.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("httpengine: "+format, args...)) }
	if o.Profile.Name == "" {
		p, err := engine.LoadProfile(DefaultProfile)
		if err != nil {
			return o, fmt.Errorf("httpengine: default profile: %w", err)
		}
		o.Profile = p
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.BlockSize < 0 {
		bad("BlockSize must be >= 1, got %d", o.BlockSize)
	}
	o.Profile = o.Profile.Resolved()
	o.Profile.BlockSize = o.BlockSize
	o.Profile.NoiseSeed ^= o.Seed
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.TimeScale == 0 {
		o.TimeScale = DefaultTimeScale
	}
	if !(o.TimeScale > 0) || math.IsInf(o.TimeScale, 0) {
		bad("TimeScale must be positive and finite, got %g", o.TimeScale)
	}
	if o.OutputTokens == 0 {
		o.OutputTokens = DefaultOutputTokens
	}
	if o.OutputTokens < 0 {
		bad("OutputTokens must be >= 1, got %d", o.OutputTokens)
	}
	if err := (Faults{ErrorRate: o.ErrorRate, AddedLatency: o.AddedLatency}).validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	switch {
	case o.KVTransferPerToken == 0:
		o.KVTransferPerToken = DefaultKVTransferPerToken
	case o.KVTransferPerToken < 0:
		o.KVTransferPerToken = 0
	case math.IsNaN(o.KVTransferPerToken) || math.IsInf(o.KVTransferPerToken, 0):
		bad("KVTransferPerToken must be finite, got %g", o.KVTransferPerToken)
	}
	return o, errors.Join(errs...)
}
