package trace

import (
	"fmt"
	"slices"
	"time"
)

// Stats summarises a trace.
type Stats struct {
	Requests int
	// Duration is the time from the first arrival to the last.
	Duration time.Duration
	// MeanQPS is (Requests-1)/Duration, the inverse of the mean
	// inter-arrival time; 0 with fewer than 2 requests or a zero Duration.
	MeanQPS float64
	// Input lengths in tokens; the median and p90 are nearest-rank
	// percentiles.
	MeanInputTokens   float64
	MedianInputTokens int
	P90InputTokens    int
	MaxInputTokens    int
	MeanOutputTokens  float64
	// TotalBlocks counts the blocks of all requests, DistinctBlocks the
	// distinct values among them.
	TotalBlocks    int
	DistinctBlocks int
	// UpperBoundHitRate is the fraction of all blocks, taking requests in
	// order, whose value appeared in an earlier request: the prefix hit
	// rate of a single infinite cache.
	UpperBoundHitRate float64
}

// Stats computes the statistics of t. An empty trace gives zero Stats.
func (t *Trace) Stats() Stats {
	n := len(t.Requests)
	s := Stats{Requests: n}
	if n == 0 {
		return s
	}
	inputs := make([]int, n)
	lo, hi := t.Requests[0].Arrival, t.Requests[0].Arrival
	var sumIn, sumOut float64
	seen := make(map[uint64]struct{})
	hits := 0
	for i, r := range t.Requests {
		lo, hi = min(lo, r.Arrival), max(hi, r.Arrival)
		inputs[i] = r.InputTokens
		sumIn += float64(r.InputTokens)
		sumOut += float64(r.OutputTokens)
		for _, b := range r.Blocks {
			if _, ok := seen[b]; ok {
				hits++
			}
		}
		for _, b := range r.Blocks {
			seen[b] = struct{}{}
		}
		s.TotalBlocks += len(r.Blocks)
	}
	s.Duration = hi - lo
	if n > 1 && s.Duration > 0 {
		s.MeanQPS = float64(n-1) / s.Duration.Seconds()
	}
	slices.Sort(inputs)
	s.MeanInputTokens = sumIn / float64(n)
	s.MedianInputTokens = inputs[(n+1)/2-1]
	s.P90InputTokens = inputs[(9*n+9)/10-1]
	s.MaxInputTokens = inputs[n-1]
	s.MeanOutputTokens = sumOut / float64(n)
	s.DistinctBlocks = len(seen)
	if s.TotalBlocks > 0 {
		s.UpperBoundHitRate = float64(hits) / float64(s.TotalBlocks)
	}
	return s
}

// String formats s on one line.
func (s Stats) String() string {
	return fmt.Sprintf("requests=%d duration=%v qps=%.3f input(mean=%.0f median=%d p90=%d max=%d) output(mean=%.0f) blocks(total=%d distinct=%d) upper-bound-hit=%.2f%%",
		s.Requests, s.Duration, s.MeanQPS, s.MeanInputTokens, s.MedianInputTokens, s.P90InputTokens,
		s.MaxInputTokens, s.MeanOutputTokens, s.TotalBlocks, s.DistinctBlocks, 100*s.UpperBoundHitRate)
}
