package state

import (
	"math"
	"slices"
	"sync"
	"time"
)

// PropagationWindow is how many recent batches the propagation percentiles
// in Stats cover.
const PropagationWindow = 1024

// latency keeps the propagation delays of the last PropagationWindow
// batches. Safe for concurrent use.
type latency struct {
	mu   sync.Mutex
	ring [PropagationWindow]time.Duration
	n    int // samples ever added
	last time.Duration
}

func (l *latency) add(d time.Duration) {
	l.mu.Lock()
	l.ring[l.n%len(l.ring)] = d
	l.n++
	l.last = d
	l.mu.Unlock()
}

// fill sets st's propagation figures. It sorts a copy of the window.
func (l *latency) fill(st *Stats) {
	l.mu.Lock()
	win := slices.Clone(l.ring[:min(l.n, len(l.ring))])
	st.PropagationLast = l.last
	l.mu.Unlock()
	if len(win) == 0 {
		return
	}
	slices.Sort(win)
	st.PropagationP50 = quantile(win, 0.50)
	st.PropagationP99 = quantile(win, 0.99)
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
