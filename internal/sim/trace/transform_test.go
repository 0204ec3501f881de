package trace

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// at builds a trace with one single-block request per arrival.
func at(arrivals ...time.Duration) *Trace {
	t := &Trace{BlockSize: 512}
	for i, a := range arrivals {
		t.Requests = append(t.Requests, Request{Arrival: a, InputTokens: 1, OutputTokens: i, Blocks: []uint64{uint64(i)}})
	}
	return t
}

func arrivalsOf(t *Trace) []time.Duration {
	var out []time.Duration
	for _, r := range t.Requests {
		out = append(out, r.Arrival)
	}
	return out
}

func TestScaleToQPS(t *testing.T) {
	s := time.Second
	tests := []struct {
		name    string
		in      *Trace
		qps     float64
		want    []time.Duration
		wantErr error
	}{
		{"slow down", at(0, s, 3*s), 1.0 / 3, []time.Duration{0, 2 * s, 6 * s}, nil},
		{"uneven gaps keep their ratio", at(0, s, 3*s), 0.5, []time.Duration{0, 4 * s / 3, 4 * s}, nil},
		{"double the rate, bursts kept", at(0, 0, 2*s, 4*s), 1.5, []time.Duration{0, 0, s, 2 * s}, nil},
		{"zero duration spreads evenly", at(0, 0, 0), 4, []time.Duration{0, s / 4, s / 2}, nil},
		{"offset start kept", at(s, 2*s), 0.25, []time.Duration{s, 5 * s}, nil},
		{"zero qps", at(0, s), 0, nil, ErrInvalidArgument},
		{"negative qps", at(0, s), -1, nil, ErrInvalidArgument},
		{"NaN qps", at(0, s), math.NaN(), nil, ErrInvalidArgument},
		{"infinite qps", at(0, s), math.Inf(1), nil, ErrInvalidArgument},
		{"tiny qps overflows", at(0, s), 1e-12, nil, ErrInvalidArgument},
		{"one request", at(0), 1, nil, ErrTooFewRequests},
		{"no request", at(), 1, nil, ErrTooFewRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := arrivalsOf(tt.in)
			err := tt.in.ScaleToQPS(tt.qps)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ScaleToQPS(%v) error = %v, want %v", tt.qps, err, tt.wantErr)
			}
			if err != nil {
				if got := arrivalsOf(tt.in); !slices.Equal(got, before) {
					t.Errorf("ScaleToQPS(%v) failed but changed arrivals to %v", tt.qps, got)
				}
				return
			}
			if got := arrivalsOf(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("ScaleToQPS(%v) arrivals = %v, want %v", tt.qps, got, tt.want)
			}
		})
	}
}

func TestScaleToQPSStats(t *testing.T) {
	tr, err := Generate(GenConfig{Seed: 3, Requests: 500, Arrival: ArrivalBursty})
	if err != nil {
		t.Fatal(err)
	}
	for _, qps := range []float64{0.1, 3, 250} {
		if err := tr.ScaleToQPS(qps); err != nil {
			t.Fatalf("ScaleToQPS(%v) error = %v", qps, err)
		}
		if got := tr.Stats().MeanQPS; math.Abs(got-qps) > 1e-6*qps {
			t.Errorf("Stats().MeanQPS after ScaleToQPS(%v) = %v, want %v", qps, got, qps)
		}
	}
}

func TestHead(t *testing.T) {
	tests := []struct {
		n    int
		want int
	}{{0, 0}, {2, 2}, {3, 3}, {10, 3}}
	for _, tt := range tests {
		tr := at(0, 1, 2)
		tr.Head(tt.n)
		if len(tr.Requests) != tt.want {
			t.Errorf("Head(%d) left %d requests, want %d", tt.n, len(tr.Requests), tt.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Head(-1) did not panic")
		}
	}()
	at(0).Head(-1)
}

func TestReplicate(t *testing.T) {
	src, err := Generate(GenConfig{Seed: 5, Requests: 300})
	if err != nil {
		t.Fatal(err)
	}
	orig := *src
	orig.Requests = cloneRequests(src.Requests)
	base := src.Stats()
	for _, k := range []int{0, 1, 3} {
		got := src.Replicate(k, 7)
		s := got.Stats()
		if s.Requests != k*base.Requests || s.DistinctBlocks != k*base.DistinctBlocks {
			t.Errorf("Replicate(%d) = %d requests, %d distinct blocks; want %d, %d",
				k, s.Requests, s.DistinctBlocks, k*base.Requests, k*base.DistinctBlocks)
		}
		if k > 0 && (s.Duration != base.Duration || math.Abs(s.UpperBoundHitRate-base.UpperBoundHitRate) > 1e-12) {
			t.Errorf("Replicate(%d) = duration %v hit rate %v, want %v and %v", k, s.Duration, s.UpperBoundHitRate, base.Duration, base.UpperBoundHitRate)
		}
		if !slices.IsSortedFunc(got.Requests, cmpArrival) {
			t.Errorf("Replicate(%d) is not sorted by arrival", k)
		}
	}
	if !reflect.DeepEqual(src, &orig) {
		t.Errorf("Replicate changed its receiver")
	}
	one := src.Replicate(1, 7)
	one.Source = src.Source
	if !reflect.DeepEqual(one, src) {
		t.Errorf("Replicate(1) differs from the original")
	}
	if a, b := src.Replicate(2, 1), src.Replicate(2, 2); reflect.DeepEqual(a.Requests, b.Requests) {
		t.Errorf("Replicate(2) gives the same ids for different salts")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Replicate(-1) did not panic")
		}
	}()
	src.Replicate(-1, 0)
}

func TestSpreadTies(t *testing.T) {
	s := time.Second
	mk := func() *Trace {
		tr := &Trace{BlockSize: 512, Source: "x"}
		for i, at := range []time.Duration{0, 0, 0, 3 * s, 3 * s, 6 * s, 9 * s, 9 * s, 9 * s} {
			tr.Requests = append(tr.Requests, Request{Arrival: at, InputTokens: 1, Blocks: []uint64{uint64(i)}})
		}
		return tr
	}
	a, b, c := mk(), mk(), mk()
	a.SpreadTies(1)
	b.SpreadTies(1)
	c.SpreadTies(2)
	if !slices.EqualFunc(a.Requests, b.Requests, func(x, y Request) bool { return x.Arrival == y.Arrival }) {
		t.Errorf("same seed, different arrivals")
	}
	if slices.EqualFunc(a.Requests, c.Requests, func(x, y Request) bool { return x.Arrival == y.Arrival }) {
		t.Errorf("seeds 1 and 2 gave the same arrivals")
	}
	if a.Source != "x (ties spread)" {
		t.Errorf("Source = %q", a.Source)
	}
	// Each group: first keeps its time, the rest inside [start, next start),
	// input order kept; the last group spreads over the median gap (3 s).
	groups := []struct {
		from, to   int
		start, end time.Duration
	}{{0, 3, 0, 3 * s}, {3, 5, 3 * s, 6 * s}, {5, 6, 6 * s, 9 * s}, {6, 9, 9 * s, 12 * s}}
	for _, g := range groups {
		if got := a.Requests[g.from].Arrival; got != g.start {
			t.Errorf("request %d at %v, want %v (first of its group)", g.from, got, g.start)
		}
		for k := g.from; k < g.to; k++ {
			r := a.Requests[k]
			if r.Arrival < g.start || r.Arrival >= g.end || r.Blocks[0] != uint64(k) {
				t.Errorf("request %d (block %d) at %v, want in [%v, %v)", k, r.Blocks[0], r.Arrival, g.start, g.end)
			}
			if k > 0 && r.Arrival < a.Requests[k-1].Arrival {
				t.Errorf("request %d at %v before request %d at %v", k, r.Arrival, k-1, a.Requests[k-1].Arrival)
			}
		}
	}
	if a.Requests[1].Arrival == 0 && a.Requests[2].Arrival == 0 {
		t.Errorf("ties at 0 not spread")
	}
	// One distinct arrival time: nothing to spread over.
	one := &Trace{Requests: []Request{{InputTokens: 1, Blocks: []uint64{1}}, {InputTokens: 1, Blocks: []uint64{2}}}}
	one.SpreadTies(1)
	if one.Requests[1].Arrival != 0 || one.Source != "" {
		t.Errorf("single-instant trace changed: %+v", one)
	}
}
