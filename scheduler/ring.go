package scheduler

import (
	"math"
	"slices"
	"sort"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Consistent-hash rings with virtual nodes (DualMap paper §3.5). Instances
// sit on every ring at points derived from their stable id, never from their
// position in a list, so adding or removing one instance only moves the keys
// on the arcs next to its points: about 1/n of the keys per ring.

// DefaultVirtualNodes is the number of points an instance of weight 1 gets
// on each ring. 160 keeps the spread of per-instance key shares within a few
// percent at 8-1024 instances while a lookup stays a short binary search.
const DefaultVirtualNodes = 160

// maxCandidates bounds how many rings (candidates per key) a scheduler may use.
const maxCandidates = 4

type point struct {
	pos    uint64
	member int32 // index into the member slice the ring was built from
}

// ring is one consistent-hash ring; immutable once built.
type ring struct {
	seed   uint64
	points []point // sorted by pos
}

// newRing places every member on a ring under seed. weights[i] scales the
// number of virtual nodes of member i (0 means 1).
func newRing(seed uint64, ids []string, weights []float64, vnodes int) ring {
	if vnodes <= 0 {
		vnodes = DefaultVirtualNodes
	}
	r := ring{seed: seed}
	for i, id := range ids {
		w := 1.0
		if i < len(weights) && weights[i] > 0 {
			w = weights[i]
		}
		k := int(math.Round(float64(vnodes) * w))
		if k < 1 {
			k = 1
		}
		h := hashing.String(id)
		for v := 0; v < k; v++ {
			r.points = append(r.points, point{pos: hashing.Seeded(seed, h+uint64(v)*hashing.Golden), member: int32(i)})
		}
	}
	sort.Slice(r.points, func(a, b int) bool {
		pa, pb := r.points[a], r.points[b]
		if pa.pos != pb.pos {
			return pa.pos < pb.pos
		}
		return ids[pa.member] < ids[pb.member] // deterministic on (astronomically rare) ties
	})
	return r
}

// first returns the index of the first point clockwise from the key's
// position on this ring.
func (r *ring) first(key uint64) int {
	h := hashing.Seeded(r.seed, key)
	pts := r.points
	lo, hi := 0, len(pts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pts[m].pos < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(pts) {
		lo = 0
	}
	return lo
}

// ringSet is the d rings of a membership. Candidate i comes from ring i; on
// a collision with an earlier candidate, or a member that is not ready,
// ring i is walked clockwise to the next acceptable member.
type ringSet struct {
	rings []ring
}

// ringSeeds are the fixed seeds of rings 1..maxCandidates. They are part of
// the wire contract between replicas: changing them remaps every key.
var ringSeeds = [maxCandidates]uint64{0x5851f42d4c957f2d, 0x14057b7ef767814f, 0xd1b54a32d192ed03, 0x8cb92ba72f3d8dd7}

func newRingSet(d int, ids []string, weights []float64, vnodes int) ringSet {
	rs := ringSet{rings: make([]ring, d)}
	for i := range rs.rings {
		rs.rings[i] = newRing(ringSeeds[i], ids, weights, vnodes)
	}
	return rs
}

// candidates writes up to len(rs.rings) distinct members for key into dst,
// skipping members for which ready[m] is false, and returns how many it wrote.
// It does not allocate.
func (rs *ringSet) candidates(key uint64, ready []bool, dst *[maxCandidates]int32) int {
	k := 0
	for ri := range rs.rings {
		r := &rs.rings[ri]
		n := len(r.points)
		if n == 0 {
			return 0
		}
		i := r.first(key)
		for step := 0; step < n; step++ {
			m := r.points[i].member
			if ready[m] && !slices.Contains(dst[:k], m) {
				dst[k] = m
				k++
				break
			}
			i++
			if i == n {
				i = 0
			}
		}
	}
	return k
}
