package peerbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dualmap/dualmap/internal/hashing"
	"github.com/dualmap/dualmap/internal/sim/trace"
)

// ErrInvalidWorkload is wrapped by the builders' errors about their input.
var ErrInvalidWorkload = errors.New("invalid workload")

// A Workload is a trace and how it is replayed: every token count scaled
// by Scale (replay.Options.ScaleTokens) and output cut to MaxOutput tokens.
// The trace's own arrivals only shape the arrival process; a run rescales
// them to its rate.
type Workload struct {
	Name      string
	Trace     *trace.Trace
	Scale     float64
	MaxOutput int
	// Note says, in a line, what the workload is (for the report).
	Note string
}

// The conversation trace as the issue measured it: a quarter of its
// tokens, at most 64 output tokens.
const (
	ConversationScale     = 0.25
	ConversationMaxOutput = 64
)

// Conversation is the first n requests of the Mooncake-format trace at
// path, at ConversationScale of their tokens and at most
// ConversationMaxOutput output tokens.
func Conversation(path string, n int) (Workload, error) {
	if n < 1 {
		return Workload{}, fmt.Errorf("peerbench: conversation: %w: want >= 1 requests, got %d", ErrInvalidWorkload, n)
	}
	tr, err := trace.ReadFile(path, trace.Options{Limit: n})
	if err != nil {
		return Workload{}, fmt.Errorf("peerbench: conversation: %w", err)
	}
	return Workload{Name: "conversation", Trace: tr, Scale: ConversationScale, MaxOutput: ConversationMaxOutput,
		Note: fmt.Sprintf("first %d requests of %s, tokens x%.2f, <= %d output tokens", len(tr.Requests), path, ConversationScale, ConversationMaxOutput)}, nil
}

// SharedPrefixConfig shapes the shared-prefix workload after llm-d's
// precise-prefix benchmark (inference-perf's shared_prefix data in
// llm-d-router's test/perf/config/shared_prefix_job1.yaml: 150 groups of 5
// prompts, a 9,500-token system prompt per group, 500-token questions,
// 1,000 output tokens), scaled to two shared cores.
type SharedPrefixConfig struct {
	Groups          int // distinct system prompts
	PromptsPerGroup int // distinct questions per system prompt
	SystemTokens    int // length of a group's system prompt (a multiple of BlockSize)
	QuestionTokens  int // length of each question
	OutputTokens    int // tokens asked for per request
	BlockSize       int // tokens per trace block
	Seed            uint64
}

// DefaultSharedPrefix is llm-d's shape at a quarter of its prompt lengths
// (the conversation trace's scale), 4 questions per group instead of 5 so
// that the 150 groups make 600 requests, and output cut to 64 tokens as in
// the other workloads: 2,400-token system prompts, 125-token questions.
func DefaultSharedPrefix() SharedPrefixConfig {
	return SharedPrefixConfig{Groups: 150, PromptsPerGroup: 4, SystemTokens: 2400, QuestionTokens: 125, OutputTokens: 64, BlockSize: 16, Seed: 1}
}

// SharedPrefix builds the shared-prefix workload: Groups×PromptsPerGroup
// requests in a random order (seeded), Poisson arrivals at 1 request/s
// (rescaled by each run), each prompt its group's system prompt followed
// by a question of its own. Block ids identify prefixes, as in Mooncake
// traces: the system prompt's blocks are shared by the group, every
// question block is unique.
func SharedPrefix(c SharedPrefixConfig) (Workload, error) {
	switch {
	case c.Groups < 1 || c.PromptsPerGroup < 1:
		return Workload{}, fmt.Errorf("peerbench: shared prefix: %w: want >= 1 groups and prompts per group, got %d and %d", ErrInvalidWorkload, c.Groups, c.PromptsPerGroup)
	case c.BlockSize < 1 || c.SystemTokens < c.BlockSize || c.SystemTokens%c.BlockSize != 0:
		return Workload{}, fmt.Errorf("peerbench: shared prefix: %w: system prompt of %d tokens is not a positive multiple of the %d-token block", ErrInvalidWorkload, c.SystemTokens, c.BlockSize)
	case c.QuestionTokens < 1 || c.OutputTokens < 0:
		return Workload{}, fmt.Errorf("peerbench: shared prefix: %w: want questions >= 1 and output >= 0 tokens, got %d and %d", ErrInvalidWorkload, c.QuestionTokens, c.OutputTokens)
	case c.Groups*c.PromptsPerGroup > 1<<20:
		return Workload{}, fmt.Errorf("peerbench: shared prefix: %w: %d requests is too many", ErrInvalidWorkload, c.Groups*c.PromptsPerGroup)
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	sysBlocks := c.SystemTokens / c.BlockSize
	qBlocks := (c.QuestionTokens + c.BlockSize - 1) / c.BlockSize
	order := make([]int, c.Groups*c.PromptsPerGroup)
	for i := range order {
		order[i] = i / c.PromptsPerGroup
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	key := hashing.SplitMix64(c.Seed)
	reqs := make([]trace.Request, len(order))
	var at time.Duration
	for i, g := range order {
		blocks := make([]uint64, 0, sysBlocks+qBlocks)
		for k := 0; k < sysBlocks; k++ {
			blocks = append(blocks, hashing.Seeded(key, uint64(g)<<32|uint64(k)))
		}
		for k := 0; k < qBlocks; k++ {
			blocks = append(blocks, hashing.Seeded(key^hashing.Golden, uint64(i)<<32|uint64(k)))
		}
		if i > 0 {
			at += time.Duration(rng.ExpFloat64() * float64(time.Second))
		}
		reqs[i] = trace.Request{Arrival: at, InputTokens: c.SystemTokens + c.QuestionTokens, OutputTokens: c.OutputTokens, Blocks: blocks}
	}
	tr := &trace.Trace{Requests: reqs, BlockSize: c.BlockSize, Source: "generated:shared-prefix"}
	return Workload{Name: "shared-prefix", Trace: tr, Scale: 1, MaxOutput: c.OutputTokens,
		Note: fmt.Sprintf("%d groups x %d prompts, %d-token system prompt + %d-token question, %d output tokens", c.Groups, c.PromptsPerGroup, c.SystemTokens, c.QuestionTokens, c.OutputTokens)}, nil
}

// ToolAgent is the first n requests of the simulator's tool&agent-like
// generator with its defaults (`dualmap sim --generate default`), replayed
// like the conversation trace: a quarter of the tokens, at most 64 output
// tokens.
func ToolAgent(n int) (Workload, error) {
	if n < 1 {
		return Workload{}, fmt.Errorf("peerbench: tool&agent: %w: want >= 1 requests, got %d", ErrInvalidWorkload, n)
	}
	tr, err := trace.Generate(trace.GenConfig{Requests: n})
	if err != nil {
		return Workload{}, fmt.Errorf("peerbench: tool&agent: %w", err)
	}
	return Workload{Name: "tool-agent", Trace: tr, Scale: ConversationScale, MaxOutput: ConversationMaxOutput,
		Note: fmt.Sprintf("--generate defaults, first %d requests, tokens x%.2f, <= %d output tokens", n, ConversationScale, ConversationMaxOutput)}, nil
}
