package httpengine

import (
	"math"
	"time"
)

// clock maps wall time to simulated time: simulated seconds = scale x wall
// seconds since start.
type clock struct {
	start time.Time
	scale float64
}

// sim returns the simulated time at wall time t.
func (c clock) sim(t time.Time) float64 { return t.Sub(c.start).Seconds() * c.scale }

// wall returns the wall time at simulated time s; times too far out for a
// time.Duration are clamped to about 146 years after start.
func (c clock) wall(s float64) time.Time {
	ns := s / c.scale * float64(time.Second)
	return c.start.Add(time.Duration(min(ns, math.MaxInt64/2)))
}
