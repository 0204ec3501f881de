package trace

import (
	"fmt"
	"math"
)

// Arrival processes of GenConfig.Arrival.
const (
	ArrivalPoisson = "poisson"
	ArrivalBursty  = "bursty"
)

// GenConfig configures Generate; the package documentation describes the
// model. A zero field takes the default given in its comment. For
// Prefixes, HotPrompts and SessionProb, where zero is the default, a
// negative value turns the feature off.
type GenConfig struct {
	// Seed drives all randomness; 0 is a seed like any other.
	Seed uint64
	// Requests is the number of requests; default 8000.
	Requests int
	// QPS is the mean arrival rate in requests per second; default 4.
	QPS float64
	// Arrival is ArrivalPoisson (default) or ArrivalBursty.
	Arrival string
	// BurstMean is the mean burst size of bursty arrivals (>= 1); default 8.
	BurstMean float64
	// BlockSize is the number of tokens per block; default 512.
	BlockSize int

	// Prefixes is the number of shared prefixes with Zipf popularity;
	// default 200, negative for none.
	Prefixes int
	// ZipfS is the Zipf exponent of prefix popularity (> 0): the prefix of
	// rank k is chosen with probability proportional to k^-ZipfS; default 1.1.
	ZipfS float64
	// PrefixMinBlocks and PrefixMaxBlocks bound the depth of a shared
	// prefix in blocks; defaults 2 and 16.
	PrefixMinBlocks int
	PrefixMaxBlocks int

	// HotPrompts is the number of very hot tool prompts; default 2,
	// negative for none.
	HotPrompts int
	// HotShare is the probability that a new session starts with a given
	// hot prompt, and so about the share of all traffic it gets; default
	// 0.2. HotPrompts × HotShare must be <= 1.
	HotShare float64
	// HotBlocks is the depth of a hot prompt in blocks; default 12.
	HotBlocks int

	// SessionProb is the probability that a request is the next turn of an
	// earlier session; default 0.3, negative for none.
	SessionProb float64
	// RecentSessions is how many of the most recent sessions a next turn
	// chooses from; default 64.
	RecentSessions int
	// TurnBlocks is the maximum number of new blocks a turn adds; default 4.
	TurnBlocks int
	// SuffixMaxBlocks is the maximum length of the unique suffix of a new
	// session's prompt, in blocks; default 8.
	SuffixMaxBlocks int

	// OutputMean is the mean number of output tokens; default 300.
	OutputMean float64
	// OutputSigma is the deviation of log(output tokens); default 1.
	// Output lengths are capped at 2^30.
	OutputSigma float64
	// MaxInputTokens caps the prompt length; default 32768.
	MaxInputTokens int
}

// Sanity bounds of GenConfig, far beyond realistic values, that keep the
// generator's arithmetic and memory in range.
const (
	maxGenBlockSize   = 1 << 20
	maxGenInputTokens = 1 << 30
	maxGenSeconds     = 1e9 // about 31 years of trace
	maxGenOutput      = 1 << 30
)

// withDefaults returns c with every zero field set to its default. It is
// idempotent: the "off" values of Prefixes, HotPrompts and SessionProb stay
// negative.
func (c GenConfig) withDefaults() GenConfig {
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setFloat := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&c.Requests, 8000)
	setFloat(&c.QPS, 4)
	if c.Arrival == "" {
		c.Arrival = ArrivalPoisson
	}
	setFloat(&c.BurstMean, 8)
	setInt(&c.BlockSize, DefaultBlockSize)
	setInt(&c.Prefixes, 200)
	setFloat(&c.ZipfS, 1.1)
	setInt(&c.PrefixMinBlocks, 2)
	setInt(&c.PrefixMaxBlocks, 16)
	setInt(&c.HotPrompts, 2)
	setFloat(&c.HotShare, 0.2)
	setInt(&c.HotBlocks, 12)
	setFloat(&c.SessionProb, 0.3)
	setInt(&c.RecentSessions, 64)
	setInt(&c.TurnBlocks, 4)
	setInt(&c.SuffixMaxBlocks, 8)
	setFloat(&c.OutputMean, 300)
	setFloat(&c.OutputSigma, 1)
	setInt(&c.MaxInputTokens, 32768)
	return c
}

// validate checks a config with defaults applied; its error wraps
// ErrInvalidConfig and names the field.
func (c GenConfig) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	var what string
	switch {
	case c.Requests < 1:
		what = fmt.Sprintf("Requests must be >= 1, got %d", c.Requests)
	case !(c.QPS > 0) || !finite(c.QPS):
		what = fmt.Sprintf("QPS must be a positive finite number, got %v", c.QPS)
	case float64(c.Requests)/c.QPS > maxGenSeconds:
		what = fmt.Sprintf("QPS %v is too low: Requests/QPS must be <= %g seconds", c.QPS, float64(maxGenSeconds))
	case c.Arrival != ArrivalPoisson && c.Arrival != ArrivalBursty:
		what = fmt.Sprintf("Arrival %q unknown (want %q or %q)", c.Arrival, ArrivalPoisson, ArrivalBursty)
	case !(c.BurstMean >= 1) || !finite(c.BurstMean):
		what = fmt.Sprintf("BurstMean must be a finite number >= 1, got %v", c.BurstMean)
	case c.BlockSize < 1 || c.BlockSize > maxGenBlockSize:
		what = fmt.Sprintf("BlockSize must be in [1, %d], got %d", maxGenBlockSize, c.BlockSize)
	case !(c.ZipfS > 0) || !finite(c.ZipfS):
		what = fmt.Sprintf("ZipfS must be a positive finite number, got %v", c.ZipfS)
	case c.PrefixMinBlocks < 1:
		what = fmt.Sprintf("PrefixMinBlocks must be >= 1, got %d", c.PrefixMinBlocks)
	case c.PrefixMaxBlocks < c.PrefixMinBlocks:
		what = fmt.Sprintf("PrefixMaxBlocks (%d) must be >= PrefixMinBlocks (%d)", c.PrefixMaxBlocks, c.PrefixMinBlocks)
	case !(c.HotShare > 0 && c.HotShare <= 1):
		what = fmt.Sprintf("HotShare must be in (0, 1], got %v", c.HotShare)
	case c.HotPrompts > 0 && float64(c.HotPrompts)*c.HotShare > 1+1e-9:
		what = fmt.Sprintf("HotPrompts × HotShare must be <= 1, got %d × %v", c.HotPrompts, c.HotShare)
	case c.HotBlocks < 1:
		what = fmt.Sprintf("HotBlocks must be >= 1, got %d", c.HotBlocks)
	case c.SessionProb > 1 || math.IsNaN(c.SessionProb):
		what = fmt.Sprintf("SessionProb must be <= 1 (negative for none), got %v", c.SessionProb)
	case c.RecentSessions < 1:
		what = fmt.Sprintf("RecentSessions must be >= 1, got %d", c.RecentSessions)
	case c.TurnBlocks < 1:
		what = fmt.Sprintf("TurnBlocks must be >= 1, got %d", c.TurnBlocks)
	case c.SuffixMaxBlocks < 1:
		what = fmt.Sprintf("SuffixMaxBlocks must be >= 1, got %d", c.SuffixMaxBlocks)
	case !(c.OutputMean > 0) || !finite(c.OutputMean):
		what = fmt.Sprintf("OutputMean must be a positive finite number, got %v", c.OutputMean)
	case !(c.OutputSigma > 0) || !finite(c.OutputSigma):
		what = fmt.Sprintf("OutputSigma must be a positive finite number, got %v", c.OutputSigma)
	case c.MaxInputTokens < 1 || c.MaxInputTokens > maxGenInputTokens:
		what = fmt.Sprintf("MaxInputTokens must be in [1, %d], got %d", maxGenInputTokens, c.MaxInputTokens)
	default:
		return nil
	}
	return fmt.Errorf("trace: %w: %s", ErrInvalidConfig, what)
}
