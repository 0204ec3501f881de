package engine

import (
	"errors"
	"fmt"
	"math"
)

// Defaults for the Profile fields where zero means default.
const (
	DefaultMaxBatchedTokens = 20480
	DefaultMaxNumSeqs       = 256
	DefaultMaxModelLen      = 20480
	DefaultBlockSize        = 512 // the Mooncake traces' block size
)

// Engine models (Profile.EngineModel).
const (
	// ModelRealistic (the default): KV blocks for running requests shared
	// with the prefix cache, preemption by recompute, and a step time that
	// grows with the decode batch's context. See the package documentation.
	ModelRealistic = "realistic"
	// ModelLegacy is the first model: running requests use no memory, a
	// decode step costs a constant per sequence. Kept for comparison.
	ModelLegacy = "legacy"
)

// maxPrefillNoise bounds Profile.PrefillNoise.
const maxPrefillNoise = 10

// Profile describes one serving instance: a model on some hardware with a
// serving configuration. Times are in seconds. The integer limits use zero
// for their default; Validate and New accept that.
type Profile struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	Hardware string `json:"hardware"`
	// Source says where the numbers come from: measured, taken from a paper
	// or the authors' code, or estimated and how.
	Source string `json:"source"`

	// PrefillPerToken is the time per uncached prompt token (> 0).
	PrefillPerToken float64 `json:"prefill_per_token_s"`
	// PrefillQuadratic is an optional attention term, in seconds per
	// (chunk tokens x context tokens at the end of the chunk); may be 0.
	PrefillQuadratic float64 `json:"prefill_quadratic_s"`
	// DecodeStepBase is the time of one engine step with a tiny batch.
	DecodeStepBase float64 `json:"decode_step_base_s"`
	// DecodePerSeq is added per running sequence in decode in the step.
	DecodePerSeq float64 `json:"decode_per_seq_s"`
	// DecodePerContextToken is added per context token of every decoding
	// sequence in the step (attention reads the sequence's KV); realistic
	// model only, may be 0.
	DecodePerContextToken float64 `json:"decode_per_context_token_s"`

	// EngineModel is ModelRealistic (default when empty) or ModelLegacy.
	EngineModel string `json:"engine_model"`
	// PrefillNoise is the relative standard deviation of a per-request
	// factor on its prefill cost (log-normal, mean 1), drawn from
	// NoiseSeed and the request's ID; 0: none. Realistic model only.
	PrefillNoise float64 `json:"prefill_noise"`
	// NoiseSeed seeds the prefill noise; set by the caller, not in JSON.
	NoiseSeed uint64 `json:"-"`

	// KVBytesPerToken is the KV cache footprint of one token (> 0).
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
	// HBMCacheBytes is the prefix-cache capacity in accelerator memory.
	HBMCacheBytes int64 `json:"hbm_cache_bytes"`
	// DRAMCacheBytes is the capacity of the host-memory tier; may be 0.
	DRAMCacheBytes int64 `json:"dram_cache_bytes"`
	// DRAMLoadPerToken is the time to bring one DRAM-tier hit token back to
	// accelerator memory; may be 0.
	DRAMLoadPerToken float64 `json:"dram_load_per_token_s"`

	// MaxBatchedTokens is the token budget of one step (default 20480).
	MaxBatchedTokens int `json:"max_batched_tokens"`
	// MaxNumSeqs caps the running sequences (default 256).
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxModelLen caps the prompt length; longer prompts are truncated
	// (default 20480).
	MaxModelLen int `json:"max_model_len"`
	// BlockSize is the number of tokens per cache block (default 512).
	BlockSize int `json:"block_size"`
}

// withDefaults returns p with zero limits replaced by their defaults.
func (p Profile) withDefaults() Profile {
	if p.MaxBatchedTokens == 0 {
		p.MaxBatchedTokens = DefaultMaxBatchedTokens
	}
	if p.MaxNumSeqs == 0 {
		p.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = DefaultMaxModelLen
	}
	if p.BlockSize == 0 {
		p.BlockSize = DefaultBlockSize
	}
	return p
}

// Legacy reports whether p selects the legacy engine model.
func (p Profile) Legacy() bool { return p.EngineModel == ModelLegacy }

// Validate reports every invalid field of p, each error naming the JSON
// field. Zero limits are valid (they mean the default).
func (p Profile) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("engine: profile %s: "+format, append([]any{field}, args...)...))
	}
	if p.Name == "" {
		bad("name", "must not be empty")
	}
	seconds := []struct {
		field    string
		v        float64
		positive bool
	}{
		{"prefill_per_token_s", p.PrefillPerToken, true},
		{"prefill_quadratic_s", p.PrefillQuadratic, false},
		{"decode_step_base_s", p.DecodeStepBase, false},
		{"decode_per_seq_s", p.DecodePerSeq, false},
		{"decode_per_context_token_s", p.DecodePerContextToken, false},
		{"dram_load_per_token_s", p.DRAMLoadPerToken, false},
		{"prefill_noise", p.PrefillNoise, false},
	}
	for _, s := range seconds {
		switch {
		case math.IsNaN(s.v) || math.IsInf(s.v, 0):
			bad(s.field, "must be a finite number of seconds, got %g", s.v)
		case s.positive && s.v <= 0:
			bad(s.field, "must be > 0, got %g", s.v)
		case s.v < 0:
			bad(s.field, "must be >= 0, got %g", s.v)
		}
	}
	if p.DecodeStepBase == 0 && p.DecodePerSeq == 0 {
		bad("decode_step_base_s", "and decode_per_seq_s must not both be 0 (a decode step would take no time)")
	}
	switch p.EngineModel {
	case "", ModelRealistic:
		if p.DecodeStepBase <= 0 && !math.IsNaN(p.DecodeStepBase) {
			bad("decode_step_base_s", "must be > 0 with the %s engine model (a step always takes time), got %g", ModelRealistic, p.DecodeStepBase)
		}
	case ModelLegacy:
		if p.PrefillNoise != 0 {
			bad("prefill_noise", "needs the %s engine model, not %s", ModelRealistic, ModelLegacy)
		}
		if p.DecodePerContextToken != 0 {
			bad("decode_per_context_token_s", "needs the %s engine model, not %s", ModelRealistic, ModelLegacy)
		}
	default:
		bad("engine_model", "must be %q or %q, got %q", ModelRealistic, ModelLegacy, p.EngineModel)
	}
	if p.PrefillNoise > maxPrefillNoise {
		bad("prefill_noise", "must be <= %d (a relative standard deviation), got %g", maxPrefillNoise, p.PrefillNoise)
	}
	if p.KVBytesPerToken <= 0 {
		bad("kv_bytes_per_token", "must be > 0, got %d", p.KVBytesPerToken)
	}
	if p.HBMCacheBytes < 0 {
		bad("hbm_cache_bytes", "must be >= 0, got %d", p.HBMCacheBytes)
	}
	if p.DRAMCacheBytes < 0 {
		bad("dram_cache_bytes", "must be >= 0, got %d", p.DRAMCacheBytes)
	}
	limits := []struct {
		field string
		v     int
	}{
		{"max_batched_tokens", p.MaxBatchedTokens},
		{"max_num_seqs", p.MaxNumSeqs},
		{"max_model_len", p.MaxModelLen},
		{"block_size", p.BlockSize},
	}
	for _, l := range limits {
		if l.v < 0 {
			bad(l.field, "must be > 0 (or 0 for the default), got %d", l.v)
		}
	}
	if d := p.withDefaults(); p.MaxNumSeqs >= 0 && p.MaxBatchedTokens >= 0 && d.MaxNumSeqs > d.MaxBatchedTokens {
		bad("max_num_seqs", "(%d) must not exceed max_batched_tokens (%d): every decoding sequence needs a token of the step budget",
			d.MaxNumSeqs, d.MaxBatchedTokens)
	}
	if d := p.withDefaults(); !p.Legacy() && len(errs) == 0 {
		hbm, _ := d.CacheTokens()
		if need := blocksFor(d.MaxModelLen, d.BlockSize); hbm/d.BlockSize < need {
			bad("hbm_cache_bytes", "holds %d blocks of %d tokens, fewer than the %d one max_model_len (%d tokens) request needs",
				hbm/d.BlockSize, d.BlockSize, need, d.MaxModelLen)
		}
	}
	return errors.Join(errs...)
}

// blocksFor returns the blocks of size bs that n tokens take.
func blocksFor(n, bs int) int { return (n + bs - 1) / bs }

// CacheTokens returns the capacities of the HBM and DRAM cache tiers in
// tokens (bytes / KVBytesPerToken, rounded down). It returns 0, 0 when
// KVBytesPerToken is not positive.
func (p Profile) CacheTokens() (hbm, dram int) {
	if p.KVBytesPerToken <= 0 {
		return 0, 0
	}
	return int(max(p.HBMCacheBytes, 0) / p.KVBytesPerToken), int(max(p.DRAMCacheBytes, 0) / p.KVBytesPerToken)
}
