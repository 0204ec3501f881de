package trace

import (
	"math"
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	req := func(arrival time.Duration, in, out int, blocks ...uint64) Request {
		return Request{Arrival: arrival, InputTokens: in, OutputTokens: out, Blocks: blocks}
	}
	tests := []struct {
		name string
		tr   *Trace
		want Stats
	}{
		{"empty", &Trace{}, Stats{}},
		{"one request", &Trace{Requests: []Request{req(0, 10, 3, 1, 1)}},
			Stats{Requests: 1, MeanInputTokens: 10, MedianInputTokens: 10, P90InputTokens: 10, MaxInputTokens: 10,
				MeanOutputTokens: 3, TotalBlocks: 2, DistinctBlocks: 1}},
		{"reuse counted only across requests", &Trace{Requests: []Request{
			req(0, 100, 1, 1, 2, 3),
			req(time.Second, 200, 2, 1, 2, 4, 4),
			req(2*time.Second, 300, 3, 1, 5),
			req(4*time.Second, 400, 4, 6),
		}}, Stats{Requests: 4, Duration: 4 * time.Second, MeanQPS: 0.75,
			MeanInputTokens: 250, MedianInputTokens: 200, P90InputTokens: 400, MaxInputTokens: 400, MeanOutputTokens: 2.5,
			TotalBlocks: 10, DistinctBlocks: 6, UpperBoundHitRate: 0.3}},
		{"zero duration", &Trace{Requests: []Request{req(0, 1, 0, 1), req(0, 1, 0, 1)}},
			Stats{Requests: 2, MeanInputTokens: 1, MedianInputTokens: 1, P90InputTokens: 1, MaxInputTokens: 1,
				TotalBlocks: 2, DistinctBlocks: 1, UpperBoundHitRate: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.tr.Stats()
			if math.Abs(got.UpperBoundHitRate-tt.want.UpperBoundHitRate) < 1e-12 {
				got.UpperBoundHitRate = tt.want.UpperBoundHitRate
			}
			if got != tt.want {
				t.Errorf("Stats() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStatsPercentiles(t *testing.T) {
	tr := &Trace{}
	for i := 1; i <= 10; i++ {
		tr.Requests = append(tr.Requests, Request{InputTokens: 11 - i, Blocks: []uint64{1}})
	}
	s := tr.Stats()
	if s.MedianInputTokens != 5 || s.P90InputTokens != 9 || s.MaxInputTokens != 10 {
		t.Errorf("Stats() median, p90, max = %d, %d, %d, want 5, 9, 10", s.MedianInputTokens, s.P90InputTokens, s.MaxInputTokens)
	}
}
