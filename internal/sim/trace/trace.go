package trace

import (
	"cmp"
	"slices"
	"time"
)

// DefaultBlockSize is the block size of the Mooncake traces, in tokens.
const DefaultBlockSize = 512

// GeneratedPrefix starts Trace.Source of every generated trace.
const GeneratedPrefix = "generated:"

// Request is one request of a trace.
type Request struct {
	// Arrival is the time since the first request of the trace (which
	// arrives at 0).
	Arrival time.Duration
	// InputTokens is the prompt length, >= 1.
	InputTokens int
	// OutputTokens is the number of generated tokens, >= 0.
	OutputTokens int
	// Blocks are the chained block hashes of the prompt: equal values mean
	// equal prefixes. Never empty in traces of this package.
	Blocks []uint64
	// SLO is this request's own TTFT objective; 0: the simulator's
	// default (--slo). Written and read as the optional "slo_ms" field.
	SLO time.Duration
}

// Trace is a request trace. Requests are sorted by Arrival (ties keep their
// input order) and the first one arrives at 0.
type Trace struct {
	Requests []Request
	// BlockSize is the number of tokens per block.
	BlockSize int
	// Skipped counts malformed lines skipped (only with
	// Options.SkipMalformed).
	Skipped int
	// Source is free-form provenance: the path for ReadFile, empty for
	// Read, and for Generate a description starting with GeneratedPrefix.
	// Replicate carries it over, so a generated trace stays labelled as
	// such.
	Source string
}

// cloneRequests returns a deep copy of reqs: no Blocks slice is shared.
func cloneRequests(reqs []Request) []Request {
	out := make([]Request, len(reqs))
	for i, r := range reqs {
		r.Blocks = slices.Clone(r.Blocks)
		out[i] = r
	}
	return out
}

func cmpArrival(a, b Request) int { return cmp.Compare(a.Arrival, b.Arrival) }

// normalise sorts reqs stably by arrival and shifts arrivals so that the
// earliest is 0.
func normalise(reqs []Request) {
	if len(reqs) == 0 {
		return
	}
	if !slices.IsSortedFunc(reqs, cmpArrival) {
		slices.SortStableFunc(reqs, cmpArrival)
	}
	base := reqs[0].Arrival
	for i := range reqs {
		reqs[i].Arrival -= base
	}
}
