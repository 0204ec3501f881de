package peerbench

import (
	"fmt"
	"math"
	"slices"
)

// KneeFactor is how far a sweep's TTFT p90 may rise above its value at the
// lightest rate before the rate counts as past the knee: queueing has then
// become most of the time to the first token.
const KneeFactor = 2.0

// A SweepPoint is one run of a rate sweep: the rate offered and the TTFT
// p90 measured.
type SweepPoint struct {
	QPS       float64
	TTFTP90MS float64
}

// Knee finds where a rate sweep's TTFT p90 turns up: knee is the lowest
// rate whose p90 exceeds factor times the p90 at the lightest rate, and
// capacity the highest rate below it (the points sorted by rate). reached
// is false when no rate passed the knee (capacity is then only a lower
// bound, and knee 0). A sweep whose second rate already passes the knee
// has capacity equal to its lightest rate.
func Knee(points []SweepPoint, factor float64) (capacity, knee float64, reached bool, err error) {
	if len(points) < 2 {
		return 0, 0, false, fmt.Errorf("peerbench: knee: want at least 2 rates, got %d", len(points))
	}
	if !(factor > 1) || math.IsInf(factor, 0) {
		return 0, 0, false, fmt.Errorf("peerbench: knee: factor must be > 1, got %v", factor)
	}
	s := slices.Clone(points)
	slices.SortFunc(s, func(a, b SweepPoint) int { return cmpFloat(a.QPS, b.QPS) })
	for _, p := range s {
		if !(p.QPS > 0) || !(p.TTFTP90MS > 0) || math.IsInf(p.QPS, 0) || math.IsInf(p.TTFTP90MS, 0) {
			return 0, 0, false, fmt.Errorf("peerbench: knee: rate %v with TTFT p90 %v ms: both must be positive", p.QPS, p.TTFTP90MS)
		}
	}
	base := s[0].TTFTP90MS
	capacity = s[0].QPS
	for _, p := range s[1:] {
		if p.TTFTP90MS > factor*base {
			return capacity, p.QPS, true, nil
		}
		capacity = p.QPS
	}
	return capacity, 0, false, nil
}
