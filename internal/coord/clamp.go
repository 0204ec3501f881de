package coord

import (
	"log/slog"
	"sync"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// Other replicas' claims are bounded before they count. A replica's load
// record says how much of each instance it holds; a record that claims
// more than an instance can hold (a bug, or a writer of the shared store
// that is no replica: issue 24) would otherwise hold this replica's
// requests in its router queue for as long as it is rewritten. So every
// peer's claim, and then their sum, is cut to the scheduler's
// RemoteBounds (what an instance can hold at all), and the scheduler is
// told how many replicas were seen (SetReplicas: its admission rule then
// counts the others for their share of each limit, leaving this replica
// its own). Clamps are counted per replica (ClampedBy, at most
// maxClampLabels replicas by name, the rest as "other") and logged at most
// once per clampLogEvery.

// maxClampLabels bounds the replica names Stats.ClampedBy holds (and so
// the series a metric built on it has); later ones count as "other".
const maxClampLabels = 32

// clampLogEvery is the least time between two clamp warnings.
const clampLogEvery = time.Minute

// clamps counts the load records cut to bounds.
type clamps struct {
	mu     sync.Mutex        // guards the fields below
	by     map[string]uint64 // replica (or "other") -> records clamped
	sums   uint64            // heartbeats whose sum over replicas was clamped
	logged time.Time         // last warning
	since  uint64            // records clamped since the last warning
}

// count records that replica's record (or, with replica "", the sum) was
// cut, and warns through log at most once per clampLogEvery.
func (k *clamps) count(replica string, now time.Time, log *slog.Logger) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[string]uint64{}
	}
	switch _, known := k.by[replica]; {
	case replica == "":
		k.sums++
	case known || len(k.by) < maxClampLabels:
		k.by[replica]++
	default:
		k.by["other"]++
	}
	k.since++
	if now.Sub(k.logged) >= clampLogEvery {
		if replica == "" {
			replica = "(sum of replicas)"
		}
		log.Warn("coord: other replicas' load cut to what the instances can hold", "replica", replica, "clamped_since_last_warning", k.since)
		k.logged, k.since = now, 0
	}
}

// snapshot copies the counts.
func (k *clamps) snapshot() (map[string]uint64, uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	by := make(map[string]uint64, len(k.by))
	for r, n := range k.by {
		by[r] = n
	}
	return by, k.sums
}

// clampOf returns l cut to instance id's bound (unchanged for an
// instance without one: not a member here, and ignored by applyLoads).
func (c *Coordinator) clampOf(id string, l scheduler.Load) (scheduler.Load, bool) {
	b, ok := c.bounds[id]
	if !ok {
		return l, false
	}
	return l.Clamp(b)
}
