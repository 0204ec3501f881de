package trace

import (
	"fmt"
	"math"
	"time"
)

// Arrival processes of GenConfig.Arrival.
const (
	ArrivalPoisson = "poisson"
	ArrivalBursty  = "bursty"
	// ArrivalOnOff alternates on periods of OnSeconds, with Poisson
	// arrivals at OnQPS, and off periods of OffSeconds without any.
	ArrivalOnOff = "onoff"
)

// Prompt shapes of GenConfig.Shape.
const (
	// ShapeAgent is the skewed tool&agent-like model of the package
	// documentation (the default).
	ShapeAgent = "agent"
	// ShapeFixed sends one identical prompt of PromptTokens tokens in every
	// request: a load test, or a popular fixed prompt.
	ShapeFixed = "fixed"
	// ShapeHotPrefix starts a PrefixShare of the requests with one shared
	// prefix of PrefixTokens tokens; the others are unique prompts of the
	// same length distribution.
	ShapeHotPrefix = "hot-prefix"
	// ShapeChat is decode-heavy chat: short unique prompts (PromptTokens on
	// average) and long outputs (OutputMean, default 1000).
	ShapeChat = "chat"
)

// SLOClass is one class of a mixed-SLO stream: a share of the requests
// that carry this TTFT objective.
type SLOClass struct {
	SLO   time.Duration
	Share float64
}

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
	// Arrival is ArrivalPoisson (default), ArrivalBursty or ArrivalOnOff.
	Arrival string
	// BurstMean is the mean burst size of bursty arrivals (>= 1); default 8.
	BurstMean float64
	// OnSeconds and OffSeconds are the lengths of the on and off periods
	// of ArrivalOnOff; defaults 10 and 20. The trace starts with an on
	// period.
	OnSeconds  float64
	OffSeconds float64
	// OnQPS is the arrival rate during on periods of ArrivalOnOff; default
	// QPS × (OnSeconds+OffSeconds) / OnSeconds, so that the mean rate is
	// QPS.
	OnQPS float64

	// Shape is the prompt model: ShapeAgent (default), ShapeFixed,
	// ShapeHotPrefix or ShapeChat. The fields below up to SLOMix are the
	// agent shape's, except where a comment names another shape.
	Shape string
	// PromptTokens is the prompt length of ShapeFixed (default 5000) and
	// the mean prompt length of ShapeChat, whose prompts are uniform in
	// [1, 2×PromptTokens-1] (default 200).
	PromptTokens int
	// PrefixShare is the share of ShapeHotPrefix requests that start with
	// the hot prefix, in (0, 1]; default 0.5.
	PrefixShare float64
	// PrefixTokens is the length of ShapeHotPrefix's hot prefix in tokens,
	// rounded up to whole blocks; default 4096.
	PrefixTokens int
	// SLOMix, when not empty, gives every request its own TTFT objective:
	// class i with probability Shares[i] (the shares sum to 1). Empty: every
	// request has the simulator's --slo.
	SLOMix []SLOClass
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

	// OutputMean is the mean number of output tokens; default 300, 1000
	// for ShapeChat.
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
	setFloat(&c.OnSeconds, 10)
	setFloat(&c.OffSeconds, 20)
	if c.OnQPS == 0 && c.OnSeconds > 0 {
		c.OnQPS = c.QPS * (c.OnSeconds + c.OffSeconds) / c.OnSeconds
	}
	if c.Shape == "" {
		c.Shape = ShapeAgent
	}
	switch c.Shape {
	case ShapeFixed:
		setInt(&c.PromptTokens, 5000)
	case ShapeChat:
		setInt(&c.PromptTokens, 200)
		setFloat(&c.OutputMean, 1000)
	}
	setFloat(&c.PrefixShare, 0.5)
	setInt(&c.PrefixTokens, 4096)
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
		what = fmt.Sprintf("Requests (requests) must be >= 1, got %d", c.Requests)
	case !(c.QPS > 0) || !finite(c.QPS):
		what = fmt.Sprintf("QPS (qps) must be a positive finite number, got %v", c.QPS)
	case float64(c.Requests)/c.QPS > maxGenSeconds:
		what = fmt.Sprintf("QPS (qps) %v is too low: Requests/QPS must be <= %g seconds", c.QPS, float64(maxGenSeconds))
	case c.Arrival != ArrivalPoisson && c.Arrival != ArrivalBursty && c.Arrival != ArrivalOnOff:
		what = fmt.Sprintf("Arrival (arrival) %q unknown (want %q, %q or %q)", c.Arrival, ArrivalPoisson, ArrivalBursty, ArrivalOnOff)
	case !(c.OnSeconds > 0) || !finite(c.OnSeconds):
		what = fmt.Sprintf("OnSeconds (on_s) must be a positive finite number, got %v", c.OnSeconds)
	case !(c.OffSeconds > 0) || !finite(c.OffSeconds):
		what = fmt.Sprintf("OffSeconds (off_s) must be a positive finite number, got %v", c.OffSeconds)
	case !(c.OnQPS > 0) || !finite(c.OnQPS):
		what = fmt.Sprintf("OnQPS (on_qps) must be a positive finite number, got %v", c.OnQPS)
	case c.Arrival == ArrivalOnOff && float64(c.Requests)/c.OnQPS*(c.OnSeconds+c.OffSeconds)/c.OnSeconds > maxGenSeconds:
		what = fmt.Sprintf("OnQPS (on_qps) %v is too low for %d requests", c.OnQPS, c.Requests)
	case c.Shape != ShapeAgent && c.Shape != ShapeFixed && c.Shape != ShapeHotPrefix && c.Shape != ShapeChat:
		what = fmt.Sprintf("Shape (shape) %q unknown (want %s, %s, %s or %s)", c.Shape, ShapeAgent, ShapeFixed, ShapeHotPrefix, ShapeChat)
	case (c.Shape == ShapeFixed || c.Shape == ShapeChat) && (c.PromptTokens < 1 || c.PromptTokens > maxGenInputTokens):
		what = fmt.Sprintf("PromptTokens (prompt_tokens) must be in [1, %d], got %d", maxGenInputTokens, c.PromptTokens)
	case !(c.PrefixShare > 0 && c.PrefixShare <= 1):
		what = fmt.Sprintf("PrefixShare (prefix_share) must be in (0, 1], got %v", c.PrefixShare)
	case c.PrefixTokens < 1 || c.PrefixTokens > maxGenInputTokens:
		what = fmt.Sprintf("PrefixTokens (prefix_tokens) must be in [1, %d], got %d", maxGenInputTokens, c.PrefixTokens)
	case sloMixError(c.SLOMix) != "":
		what = sloMixError(c.SLOMix)
	case !(c.BurstMean >= 1) || !finite(c.BurstMean):
		what = fmt.Sprintf("BurstMean (burst_mean) must be a finite number >= 1, got %v", c.BurstMean)
	case c.BlockSize < 1 || c.BlockSize > maxGenBlockSize:
		what = fmt.Sprintf("BlockSize (block_size) must be in [1, %d], got %d", maxGenBlockSize, c.BlockSize)
	case !(c.ZipfS > 0) || !finite(c.ZipfS):
		what = fmt.Sprintf("ZipfS (zipf) must be a positive finite number, got %v", c.ZipfS)
	case c.PrefixMinBlocks < 1:
		what = fmt.Sprintf("PrefixMinBlocks (prefix_min_blocks) must be >= 1, got %d", c.PrefixMinBlocks)
	case c.PrefixMaxBlocks < c.PrefixMinBlocks:
		what = fmt.Sprintf("PrefixMaxBlocks (prefix_max_blocks) (%d) must be >= PrefixMinBlocks (%d)", c.PrefixMaxBlocks, c.PrefixMinBlocks)
	case !(c.HotShare > 0 && c.HotShare <= 1):
		what = fmt.Sprintf("HotShare (hot_share) must be in (0, 1], got %v", c.HotShare)
	case c.HotPrompts > 0 && float64(c.HotPrompts)*c.HotShare > 1+1e-9:
		what = fmt.Sprintf("HotPrompts × HotShare (hot_prompts × hot_share) must be <= 1, got %d × %v", c.HotPrompts, c.HotShare)
	case c.HotBlocks < 1:
		what = fmt.Sprintf("HotBlocks (hot_blocks) must be >= 1, got %d", c.HotBlocks)
	case c.SessionProb > 1 || math.IsNaN(c.SessionProb):
		what = fmt.Sprintf("SessionProb (session_prob) must be <= 1 (negative for none), got %v", c.SessionProb)
	case c.RecentSessions < 1:
		what = fmt.Sprintf("RecentSessions (recent_sessions) must be >= 1, got %d", c.RecentSessions)
	case c.TurnBlocks < 1:
		what = fmt.Sprintf("TurnBlocks (turn_blocks) must be >= 1, got %d", c.TurnBlocks)
	case c.SuffixMaxBlocks < 1:
		what = fmt.Sprintf("SuffixMaxBlocks (suffix_max_blocks) must be >= 1, got %d", c.SuffixMaxBlocks)
	case !(c.OutputMean > 0) || !finite(c.OutputMean):
		what = fmt.Sprintf("OutputMean (output_mean) must be a positive finite number, got %v", c.OutputMean)
	case !(c.OutputSigma > 0) || !finite(c.OutputSigma):
		what = fmt.Sprintf("OutputSigma (output_sigma) must be a positive finite number, got %v", c.OutputSigma)
	case c.MaxInputTokens < 1 || c.MaxInputTokens > maxGenInputTokens:
		what = fmt.Sprintf("MaxInputTokens (max_input_tokens) must be in [1, %d], got %d", maxGenInputTokens, c.MaxInputTokens)
	default:
		return nil
	}
	return fmt.Errorf("trace: %w: %s", ErrInvalidConfig, what)
}

// maxSLOClasses bounds GenConfig.SLOMix.
const maxSLOClasses = 64

// sloMixError describes what is wrong with a SLO mix, or returns "".
func sloMixError(mix []SLOClass) string {
	if len(mix) > maxSLOClasses {
		return fmt.Sprintf("SLOMix (slo_mix) has %d classes, at most %d", len(mix), maxSLOClasses)
	}
	sum := 0.0
	for i, m := range mix {
		switch {
		case m.SLO <= 0:
			return fmt.Sprintf("SLOMix (slo_mix) class %d: SLO must be > 0, got %v", i, m.SLO)
		case !(m.Share > 0 && m.Share <= 1):
			return fmt.Sprintf("SLOMix (slo_mix) class %d: share must be in (0, 1], got %v", i, m.Share)
		}
		sum += m.Share
	}
	if len(mix) > 0 && math.Abs(sum-1) > 1e-6 {
		return fmt.Sprintf("SLOMix (slo_mix) shares must sum to 1, got %v", sum)
	}
	return ""
}
