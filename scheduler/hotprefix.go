package scheduler

import (
	"maps"
	"math"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Hot keys that cannot be split deeper. Key depth (keydepth.go) spreads a
// hot prefix by lengthening the key, so the requests under it hash to
// several candidate sets. That fails when the key already is the whole
// prompt (identical prompts: a load test, a popular fixed prompt) or has
// reached MaxDepth: every request of the prefix keeps the same candidates,
// and one set of Candidates instances takes a share of the traffic that
// could need the whole pool.
//
// The key-depth window also counts every request's whole prompt, so an
// identical prompt is found hot in the first rotation, whatever the depth
// its key has reached; a request whose key or whole prompt is replicated
// takes a variant of its key.
//
// Such a key is replicated instead: when its share of the window exceeds
// the split threshold (SplitFactor/n), it gets R = ceil(2 share / threshold)
// variants (at most MaxReplicas and 2n: with sets of a few candidates, n
// variants can still miss an instance), and each request under it takes the
// next variant in turn. Variant 0 is the key itself, variant j > 0 the key
// mixed with j: another set of ring positions, so the prefix's candidates
// grow from one set to up to R sets, in proportion to its share. The
// policy knows the key is replicated (dualmap then balances it inside the
// set, since every candidate holds the prefix after one request). The
// count is recomputed each time a window bucket closes and the key merges
// back to one set when its share falls below the merge threshold
// (MergeFactor/n), like a split. Key depth stays the first resort: only a
// key that cannot grow is replicated.
//
// The replica counts are this router's own, from its own traffic: they
// are not part of KeyDepthState. Routers that disagree on a count differ
// only in how many sets they spread a hot prompt over.

// markEnd records that a request's key h could not be lengthened.
func (k *keyDepth) markEnd(h uint64) {
	if k.cfg.MaxReplicas < 0 {
		return
	}
	k.ends[h] = struct{}{}
}

// replicate recomputes the replica counts from the window (at rotate, before
// the oldest bucket is dropped) and reports whether they changed.
func (k *keyDepth) replicate() (changed bool) {
	if k.total == 0 {
		return false
	}
	splitAt, mergeAt := k.thresholds()
	total := float64(k.total)
	limit := uint32(max(1, min(k.cfg.MaxReplicas, 2*k.n)))
	for h := range k.ends {
		share := float64(k.counts[h]) / total
		old := k.replicas[h]
		var r uint32
		switch {
		case k.counts[h] == 0:
			delete(k.ends, h)
		case share > splitAt || (old > 1 && share >= mergeAt):
			r = uint32(min(float64(limit), math.Ceil(2*share/splitAt)))
			r = max(r, 2)
		}
		if r <= 1 {
			if old > 0 {
				delete(k.replicas, h)
				changed = true
			}
			continue
		}
		if r != old {
			k.replicas[h] = r
			changed = true
		}
	}
	return changed
}

// replicaSet returns a copy of the replica counts, for a snapshot (nil when
// there are none, so the routing path skips the lookup).
func (k *keyDepth) replicaSet() map[uint64]uint32 {
	if len(k.replicas) == 0 {
		return nil
	}
	return maps.Clone(k.replicas)
}

// variant returns the ring key of variant j of key.
func variant(key uint64, j uint64) uint64 {
	if j == 0 {
		return key
	}
	return hashing.Seeded(j, key)
}
