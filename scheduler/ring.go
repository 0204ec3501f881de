package scheduler

import (
	"cmp"
	"math"
	"slices"
	"strings"

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
	var pts []point
	for i, id := range ids {
		w := 0.0
		if i < len(weights) {
			w = weights[i]
		}
		pts = appendPoints(pts, seed, id, pointCount(w, vnodes), int32(i))
	}
	sortPoints(pts, ids)
	return ring{seed: seed, points: pts}
}

// pointCount is the number of points of a member of weight w (0 means 1)
// with vnodes points per unit of weight (0 means DefaultVirtualNodes).
func pointCount(w float64, vnodes int) int {
	if vnodes <= 0 {
		vnodes = DefaultVirtualNodes
	}
	if !(w > 0) {
		w = 1
	}
	return max(int(math.Round(float64(vnodes)*w)), 1)
}

// appendPoints appends the k points of member m, of id, on the ring of
// seed: they derive from the id alone.
func appendPoints(dst []point, seed uint64, id string, k int, m int32) []point {
	h := hashing.String(id)
	for v := 0; v < k; v++ {
		dst = append(dst, point{pos: hashing.Seeded(seed, h+uint64(v)*hashing.Golden), member: m})
	}
	return dst
}

// pointLess orders points by position, then by member id: deterministic
// on (astronomically rare) ties, whatever the members' order.
func pointLess(a, b point, ids []string) bool {
	if a.pos != b.pos {
		return a.pos < b.pos
	}
	return ids[a.member] < ids[b.member]
}

func sortPoints(pts []point, ids []string) {
	slices.SortFunc(pts, func(a, b point) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return strings.Compare(ids[a.member], ids[b.member])
	})
}

// rebuild returns r for a new member list, changing only the arcs of the
// members that came or went (DualMap's consistent hashing, applied to the
// build itself): the points of old member o are kept as member remap[o]
// of the new list, or dropped when remap[o] < 0, and added (the points of
// the new members, sorted by pointLess) are merged in. ids are the new
// list's ids. The result is the ring newRing would build for the new list,
// in time linear in its points.
func (r *ring) rebuild(remap []int32, added []point, ids []string) ring {
	kept := 0
	for _, p := range r.points {
		if remap[p.member] >= 0 {
			kept++
		}
	}
	out := make([]point, 0, kept+len(added))
	j := 0
	for _, p := range r.points {
		m := remap[p.member]
		if m < 0 {
			continue
		}
		p.member = m
		for j < len(added) && pointLess(added[j], p, ids) {
			out = append(out, added[j])
			j++
		}
		out = append(out, p)
	}
	out = append(out, added[j:]...)
	return ring{seed: r.seed, points: out}
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

// rebuild returns rs for a new member list of ids and weights (see
// ring.rebuild): remap maps the old members' indexes to the new ones (-1:
// gone), added lists the new list's members whose points join.
func (rs *ringSet) rebuild(remap, added []int32, ids []string, weights []float64, vnodes int) ringSet {
	out := ringSet{rings: make([]ring, len(rs.rings))}
	var pts []point
	for i := range rs.rings {
		pts = pts[:0]
		for _, m := range added {
			pts = appendPoints(pts, rs.rings[i].seed, ids[m], pointCount(weights[m], vnodes), m)
		}
		sortPoints(pts, ids)
		out.rings[i] = rs.rings[i].rebuild(remap, pts, ids)
	}
	return out
}

// emptyRingSet is the d rings of no members.
func emptyRingSet(d int) ringSet {
	rs := ringSet{rings: make([]ring, d)}
	for i := range rs.rings {
		rs.rings[i].seed = ringSeeds[i]
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
