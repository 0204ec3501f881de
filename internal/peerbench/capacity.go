package peerbench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// KeepUpShare is how much of the offered rate a run must serve to keep up
// (RampStep.Served against RampStep.Sent). Below 1 for the requests of a
// stable pool's long tail that end after the window; a pool 10% past its
// capacity serves about 1/1.1 = 91% of its offered rate, and falls further
// behind the longer the run.
const KeepUpShare = 0.9

// RampStep is one run of a capacity ramp.
type RampStep struct {
	// Offered is the rate the run was asked for; Sent the rate it sent
	// at (replay.Summary.AchievedQPS).
	Offered, Sent float64
	// OK and Failed count the requests that succeeded and failed.
	OK, Failed int
	// FirstSent and LastSent are when the first and last request was
	// sent, since the run started; Done when each successful request
	// ended; E2EP50 the median time from sending to the end.
	FirstSent, LastSent time.Duration
	Done                []time.Duration
	E2EP50              time.Duration
}

// Served is the rate at which requests completed while the run was
// sending, one median request time later: completions in [FirstSent +
// E2EP50, LastSent + E2EP50] over LastSent - FirstSent. A pool that keeps
// up completes about what it is sent in that window, whatever the tail of
// request times (a few long prompts finish late either way); one that does
// not falls behind by its growing backlog. 0 when not defined.
func (s RampStep) Served() float64 {
	span := s.LastSent - s.FirstSent
	if span <= 0 {
		return 0
	}
	from, to := s.FirstSent+s.E2EP50, s.LastSent+s.E2EP50
	n := 0
	for _, d := range s.Done {
		if d >= from && d <= to {
			n++
		}
	}
	return float64(n) / span.Seconds()
}

// KeepsUp says whether the run served what it was sent: no failed request
// and Served at least KeepUpShare of the sending rate.
func (s RampStep) KeepsUp() bool {
	return s.Failed == 0 && s.Sent > 0 && s.Served() >= KeepUpShare*s.Sent
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
