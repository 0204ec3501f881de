package state

import (
	"testing"
	"time"
)

func TestLatency(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name          string
		samples       int
		p50, p99, end time.Duration
	}{
		{"empty", 0, 0, 0, 0},
		{"one", 1, ms, ms, ms},
		{"hundred", 100, 50 * ms, 99 * ms, 100 * ms},
		// Only the last PropagationWindow samples count.
		{"window", PropagationWindow + 500, time.Duration(500+PropagationWindow/2) * ms, time.Duration(500+1014) * ms, time.Duration(500+PropagationWindow) * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l latency
			for i := 1; i <= tt.samples; i++ {
				l.add(time.Duration(i) * ms)
			}
			var st Stats
			l.fill(&st)
			if st.PropagationP50 != tt.p50 || st.PropagationP99 != tt.p99 || st.PropagationLast != tt.end {
				t.Errorf("fill() = p50 %v, p99 %v, last %v; want %v, %v, %v", st.PropagationP50, st.PropagationP99, st.PropagationLast, tt.p50, tt.p99, tt.end)
			}
		})
	}
}
