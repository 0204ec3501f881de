package peerbench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// MaxDrift is how much longer the last quarter of a run's requests may
// take than its first quarter (median E2E against median E2E) for the run
// to keep up. A pool within its capacity serves the last requests as fast
// as the first, whatever the tail of request times; past it, its backlog
// grows through the run and with it the time each request takes.
const MaxDrift = 1.5

// RampStep is one run of a capacity ramp.
type RampStep struct {
	// Offered is the rate the run was asked for; Sent the rate it sent
	// at (replay.Summary.AchievedQPS).
	Offered, Sent float64
	// OK and Failed count the requests that succeeded and failed.
	OK, Failed int
	// E2E are the successful requests' times from sending to the end, in
	// the order they were sent.
	E2E []time.Duration
}

// Drift is the median E2E of the last quarter of the successful requests
// over that of the first quarter; 0 with fewer than 8 of them.
func (s RampStep) Drift() float64 {
	n := len(s.E2E)
	if n < 8 {
		return 0
	}
	q := n / 4
	first, last := median(s.E2E[:q]), median(s.E2E[n-q:])
	if first <= 0 {
		return 0
	}
	return float64(last) / float64(first)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// KeepsUp says whether the run served what it was sent: no failed request
// and a Drift of at most MaxDrift.
func (s RampStep) KeepsUp() bool {
	d := s.Drift()
	return s.Failed == 0 && d > 0 && d <= MaxDrift
}

// Capacity is the highest offered rate of the ramp below which every step
// kept up (steps sorted by Offered; the ramp stops counting at the first
// step that did not keep up), and whether any step failed to keep up (if
// none did, the ramp did not reach capacity and the value is a lower
// bound). A ramp whose first step already fails has capacity 0.
func Capacity(steps []RampStep) (rate float64, reached bool) {
	s := slices.Clone(steps)
	slices.SortFunc(s, func(a, b RampStep) int { return cmpFloat(a.Offered, b.Offered) })
	for _, st := range s {
		if !st.KeepsUp() {
			return rate, true
		}
		rate = st.Offered
	}
	return rate, false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RampRates are the rates of a capacity ramp: start, start×factor, ...,
// steps of them.
func RampRates(start, factor float64, steps int) ([]float64, error) {
	if !(start > 0) || math.IsInf(start, 0) || !(factor > 1) || math.IsInf(factor, 0) || steps < 1 || steps > 64 {
		return nil, fmt.Errorf("peerbench: ramp: want start > 0, factor > 1 and 1-64 steps, got %v, %v, %d", start, factor, steps)
	}
	out := make([]float64, steps)
	r := start
	for i := range out {
		out[i] = math.Round(r*100) / 100
		r *= factor
	}
	return out, nil
}

// RatesAt are the run rates: each percentage of capacity, rounded to
// 0.1 request/s and at least 0.1.
func RatesAt(capacity float64, percents []float64) ([]float64, error) {
	if !(capacity > 0) || math.IsInf(capacity, 0) {
		return nil, fmt.Errorf("peerbench: rates: capacity must be a positive rate, got %v", capacity)
	}
	out := make([]float64, len(percents))
	for i, p := range percents {
		if !(p > 0) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("peerbench: rates: percentage %v is not positive", p)
		}
		out[i] = max(0.1, math.Round(capacity*p/100*10)/10)
	}
	return out, nil
}
