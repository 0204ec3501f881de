package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// maxArrival is the latest arrival ScaleToQPS produces: 2^62 ns, about 146
// years, comfortably inside time.Duration.
const maxArrival = float64(1 << 62)

// ScaleToQPS rescales arrival times, in place, so that the trace's mean
// rate (Requests-1)/Duration, as in Stats, becomes qps: each offset from the
// first arrival is multiplied by oldRate/qps and rounded to the nanosecond,
// which keeps the order and the burst structure. If all requests arrive at
// the same instant they are instead spaced evenly, 1/qps apart.
//
// The requests must be sorted by arrival, as every function of the package
// leaves them. It fails, leaving t unchanged, with ErrInvalidArgument if qps
// is not a positive finite number or so small that the last arrival would
// be after 2^62 ns (146 years), and with ErrTooFewRequests if t has fewer
// than 2 requests.
func (t *Trace) ScaleToQPS(qps float64) error {
	if !(qps > 0) || math.IsInf(qps, 1) {
		return fmt.Errorf("trace: ScaleToQPS: %w: qps must be a positive finite number, got %v", ErrInvalidArgument, qps)
	}
	n := len(t.Requests)
	if n < 2 {
		return fmt.Errorf("trace: ScaleToQPS: %w: need at least 2, have %d", ErrTooFewRequests, n)
	}
	first := t.Requests[0].Arrival
	span := t.Requests[n-1].Arrival - first
	newSpan := float64(n-1) * float64(time.Second) / qps
	if float64(first)+newSpan > maxArrival {
		return fmt.Errorf("trace: ScaleToQPS: %w: qps %v would put the last of %d requests after 2^62 ns", ErrInvalidArgument, qps, n)
	}
	if span <= 0 {
		step := newSpan / float64(n-1)
		for i := range t.Requests {
			t.Requests[i].Arrival = first + time.Duration(math.Round(float64(i)*step))
		}
		return nil
	}
	factor := newSpan / float64(span)
	for i := range t.Requests {
		off := t.Requests[i].Arrival - first
		t.Requests[i].Arrival = first + time.Duration(math.Round(float64(off)*factor))
	}
	return nil
}

// Head keeps the first n requests of t (all of them if n >= their number).
// It panics if n < 0.
func (t *Trace) Head(n int) {
	if n < 0 {
		panic(fmt.Sprintf("trace: Head(%d): negative count", n))
	}
	if n >= len(t.Requests) {
		return
	}
	clear(t.Requests[n:]) // let the dropped blocks be collected
	t.Requests = slices.Clip(t.Requests[:n])
}

// Replicate returns k copies of t merged by arrival, to load k times as
// many instances with the same kind of traffic; ScaleToQPS can then set the
// rate. Copy 0 is t unchanged; in copy c >= 1 every block id b becomes
// Mix64(Mix64(b) + Mix64(salt + c·Golden)) (see package hashing), a
// bijection, so each copy keeps its prefix structure while sharing no block
// with another copy (up to 64-bit collisions). At equal arrivals copy c
// comes before copy c+1. Skipped is t's; Source is t's with " (xk)"
// appended. k == 0 gives an empty trace; Replicate panics if k < 0.
func (t *Trace) Replicate(k int, salt uint64) *Trace {
	if k < 0 {
		panic(fmt.Sprintf("trace: Replicate(%d): negative count", k))
	}
	out := &Trace{BlockSize: t.BlockSize, Skipped: t.Skipped, Source: t.Source}
	if t.Source != "" {
		out.Source = fmt.Sprintf("%s (x%d)", t.Source, k)
	}
	out.Requests = make([]Request, 0, k*len(t.Requests))
	for c := range k {
		reqs := cloneRequests(t.Requests)
		if c > 0 {
			f := replicaMap(salt, c)
			for _, r := range reqs {
				for j, b := range r.Blocks {
					r.Blocks[j] = f(b)
				}
			}
		}
		out.Requests = append(out.Requests, reqs...)
	}
	slices.SortStableFunc(out.Requests, cmpArrival)
	return out
}

// SpreadTies spreads, in place, the requests that share an arrival time
// over the interval up to the next distinct arrival time: the first request
// of each group keeps its time, the others get uniformly random offsets
// inside the interval (deterministic by seed), in their input order. The
// last group is spread over the median interval between distinct arrival
// times. Recorded traces often have coarse timestamps (the Mooncake
// conversation trace arrives in steps of 3 s), which turns each step into a
// burst of simultaneous requests; that matters when several routers see
// parts of one burst at once. A trace with a single distinct arrival time is
// left unchanged. Source gets " (ties spread)" appended.
func (t *Trace) SpreadTies(seed uint64) {
	reqs := t.Requests
	var gaps []time.Duration
	for i := 1; i < len(reqs); i++ {
		if d := reqs[i].Arrival - reqs[i-1].Arrival; d > 0 {
			gaps = append(gaps, d)
		}
	}
	if len(gaps) == 0 {
		return
	}
	slices.Sort(gaps)
	median := gaps[len(gaps)/2]
	rng := rand.New(rand.NewPCG(seed, 0x5bead))
	offs := make([]time.Duration, 0, 16)
	for i := 0; i < len(reqs); {
		j := i + 1
		for j < len(reqs) && reqs[j].Arrival == reqs[i].Arrival {
			j++
		}
		gap := median
		if j < len(reqs) {
			gap = reqs[j].Arrival - reqs[i].Arrival
		}
		offs = offs[:0]
		for k := i + 1; k < j; k++ {
			offs = append(offs, time.Duration(rng.Int64N(int64(gap))))
		}
		slices.Sort(offs)
		for k := i + 1; k < j; k++ {
			reqs[k].Arrival += offs[k-i-1]
		}
		i = j
	}
	if t.Source != "" {
		t.Source += " (ties spread)"
	}
}
