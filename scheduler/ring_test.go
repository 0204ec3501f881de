package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dualmap/dualmap/internal/hashing"
)

func ids(list []Instance) []string {
	s := make([]string, len(list))
	for i, in := range list {
		s[i] = in.ID
	}
	return s
}

func allReady(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

func TestCandidatesDistinctAndStable(t *testing.T) {
	for _, n := range []int{2, 3, 8, 64} {
		list := ids(pool(n))
		rs := newRingSet(2, list, nil, DefaultVirtualNodes)
		ready := allReady(n)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 10000; i++ {
			key := rng.Uint64()
			var a, b [maxCandidates]int32
			na := rs.candidates(key, ready, &a)
			nb := rs.candidates(key, ready, &b)
			if na != 2 || nb != 2 {
				t.Fatalf("n=%d: candidates() = %d, want 2", n, na)
			}
			if a[0] == a[1] {
				t.Fatalf("n=%d: candidates(%x) = %v, want two distinct", n, key, a[:2])
			}
			if a != b {
				t.Fatalf("n=%d: candidates not stable: %v then %v", n, a, b)
			}
		}
	}
}

func TestSingleInstanceHasOneCandidate(t *testing.T) {
	rs := newRingSet(2, []string{"a:1"}, nil, 16)
	var c [maxCandidates]int32
	if n := rs.candidates(42, []bool{true}, &c); n != 1 || c[0] != 0 {
		t.Errorf("candidates() = %d %v, want 1 [0]", n, c[:n])
	}
}

func TestCandidatesSkipUnready(t *testing.T) {
	list := ids(pool(8))
	rs := newRingSet(2, list, nil, DefaultVirtualNodes)
	ready := allReady(8)
	ready[3], ready[5] = false, false
	for key := uint64(0); key < 5000; key++ {
		var c [maxCandidates]int32
		n := rs.candidates(key*hashing.Golden, ready, &c)
		if n != 2 {
			t.Fatalf("candidates() = %d, want 2", n)
		}
		for _, m := range c[:n] {
			if !ready[m] {
				t.Fatalf("candidates() = %v includes unready member %d", c[:n], m)
			}
		}
	}
}

// The rings are independent: ring 2's owner is not a function of ring 1's.
func TestRingsIndependent(t *testing.T) {
	n := 8
	rs := newRingSet(2, ids(pool(n)), nil, DefaultVirtualNodes)
	var joint [8][8]int
	rng := rand.New(rand.NewPCG(3, 4))
	const keys = 200000
	for i := 0; i < keys; i++ {
		k := rng.Uint64()
		joint[owner(&rs.rings[0], k)][owner(&rs.rings[1], k)]++
	}
	// Each (owner1, owner2) cell should hold about keys/64 keys.
	want := float64(keys) / float64(n*n)
	for a := range joint {
		for b := range joint[a] {
			if got := float64(joint[a][b]); got < want*0.6 || got > want*1.4 {
				t.Errorf("joint[%d][%d] = %v, want about %v", a, b, got, want)
			}
		}
	}
}

// remapFraction measures, over keys random keys, the fraction whose ring-1
// owner and whose candidate pair changes when the member list changes.
func remapFraction(before, after []string, keys int) (owner, pair float64) {
	a := newRingSet(2, before, nil, DefaultVirtualNodes)
	b := newRingSet(2, after, nil, DefaultVirtualNodes)
	ra, rb := allReady(len(before)), allReady(len(after))
	rng := rand.New(rand.NewPCG(5, 6))
	movedOwner, movedPair := 0, 0
	for i := 0; i < keys; i++ {
		k := rng.Uint64()
		var ca, cb [maxCandidates]int32
		a.candidates(k, ra, &ca)
		b.candidates(k, rb, &cb)
		if before[ca[0]] != after[cb[0]] {
			movedOwner++
		}
		if before[ca[0]] != after[cb[0]] || before[ca[1]] != after[cb[1]] {
			movedPair++
		}
	}
	return float64(movedOwner) / float64(keys), float64(movedPair) / float64(keys)
}

func TestRemapFraction(t *testing.T) {
	const keys = 1_000_000
	for _, n := range []int{8, 64} {
		list := ids(pool(n + 1))
		small, big := list[:n], list
		// Remove the member in the middle so it is not always the last.
		removed := append(append([]string{}, list[:n/2]...), list[n/2+1:n]...)
		tests := []struct {
			name          string
			before, after []string
			ideal         float64
		}{
			{name: "add", before: small, after: big, ideal: 1 / float64(n+1)},
			{name: "remove", before: small, after: removed, ideal: 1 / float64(n)},
		}
		for _, tt := range tests {
			owner, pair := remapFraction(tt.before, tt.after, keys)
			t.Logf("n=%d %s: ring-1 owner moved for %.4f of keys, pair changed for %.4f (ideal per ring %.4f)", n, tt.name, owner, pair, tt.ideal)
			if owner > 1.5*tt.ideal || owner < tt.ideal/1.5 {
				t.Errorf("n=%d %s: owner remap = %.4f, want within 1.5x of %.4f", n, tt.name, owner, tt.ideal)
			}
			// Each of the two rings moves about 1/n; the pair moves about 2/n.
			if pair > 1.5*2*tt.ideal {
				t.Errorf("n=%d %s: pair remap = %.4f, want <= 1.5 x 2/n = %.4f", n, tt.name, pair, 3*tt.ideal)
			}
		}
	}
}

func TestWeights(t *testing.T) {
	list := []string{"a", "b", "c", "d"}
	r := newRing(ringSeeds[0], list, []float64{1, 1, 1, 3}, DefaultVirtualNodes)
	var counts [4]int
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 200000; i++ {
		counts[owner(&r, rng.Uint64())]++
	}
	share := float64(counts[3]) / 200000
	if share < 0.4 || share > 0.6 {
		t.Errorf("weight-3 member share = %.3f, want about 0.5", share)
	}
}

// owner returns the member owning key on r (r must have points).
func owner(r *ring, key uint64) int32 { return r.points[r.first(key)].member }

// ownerScan is the ring's contract computed without its binary search or
// its sort: the member of the point with the smallest position at or after
// the key's, or, when the key lies past every point, of the point with the
// smallest position of all (the ring wraps around).
func ownerScan(r *ring, key uint64) (member int32, wrapped bool) {
	h := hashing.Seeded(r.seed, key)
	best, lowest := -1, -1
	for i, p := range r.points {
		if p.pos >= h && (best < 0 || p.pos < r.points[best].pos) {
			best = i
		}
		if lowest < 0 || p.pos < r.points[lowest].pos {
			lowest = i
		}
	}
	if best < 0 {
		return r.points[lowest].member, true
	}
	return r.points[best].member, false
}

// Ring wrap-around: a key whose position is past the last point belongs to
// the first point's member, and a walk that skips unready members past the
// last point continues at the first. Pins ring.first's `lo = 0` and the
// walk's `i = 0` in candidates (made `len(pts)-1`, or left off, each of the
// checks below fails).
func TestRingWrapAround(t *testing.T) {
	// Three members with one point each: every point is a different member,
	// so landing on the last point instead of the first is visible.
	list := []string{"a:1", "b:1", "c:1"}
	rs := newRingSet(1, list, nil, 1)
	r := &rs.rings[0]
	last := r.points[len(r.points)-1]
	wraps, checked := 0, 0
	for key := uint64(1); wraps < 50 || checked < 2000; key++ {
		if key > 1<<20 {
			t.Fatalf("%d keys tried, %d past the last point (at %x): the search for wrapping keys is broken", key, wraps, last.pos)
		}
		want, wrapped := ownerScan(r, key)
		if got := owner(r, key); got != want {
			t.Fatalf("owner(%x) = member %d, want %d (wrapped around: %v; first point %d, last %d)", key, got, want, wrapped, r.points[0].member, last.member)
		}
		if wrapped {
			wraps++
			// The walk from the first point when its member is unready goes
			// to the next point clockwise.
			ready := allReady(len(list))
			ready[r.points[0].member] = false
			var c [maxCandidates]int32
			if n := rs.candidates(key, ready, &c); n != 1 || c[0] != r.points[1].member {
				t.Fatalf("candidates(%x) past the last point, first member down = %v, want [%d]", key, c[:n], r.points[1].member)
			}
		}
		checked++
	}
	// A key landing on the last point whose member is unready walks past
	// the end of the points to the first.
	found := false
	for key := uint64(1); key < 1<<20 && !found; key++ {
		h := hashing.Seeded(r.seed, key)
		if h <= r.points[len(r.points)-2].pos || h > last.pos {
			continue
		}
		found = true
		ready := allReady(len(list))
		ready[last.member] = false
		var c [maxCandidates]int32
		if n := rs.candidates(key, ready, &c); n != 1 || c[0] != r.points[0].member {
			t.Fatalf("candidates(%x) on the last point, its member down = %v, want the first point's [%d]", key, c[:n], r.points[0].member)
		}
	}
	if !found {
		t.Fatal("no key lands on the last point in 2^20 tries")
	}
}

// SetInstances rebuilds only the arcs of the members that came, went or
// changed weight (ring.rebuild); the rings it ends with are, point for
// point, the ones a full build of the same list makes, through adds,
// removals, weight changes and reorderings.
func TestRingRebuildMatchesFullBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	all := pool(96)
	s, _ := mustNew(t, Config{VirtualNodes: 20}, 0)
	for round := range 60 {
		var list []Instance
		for _, in := range all {
			if rng.IntN(3) > 0 {
				in.Weight = float64(rng.IntN(3)) // 0 and 1 are the same weight
				list = append(list, in)
			}
		}
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		if round%7 == 3 {
			list = list[:0] // empty, then built again from nothing
		}
		if err := s.SetInstances(list); err != nil {
			t.Fatal(err)
		}
		w := make([]float64, len(list))
		for i, in := range list {
			w[i] = in.Weight
		}
		want := newRingSet(s.cfg.Candidates, ids(list), w, 20)
		for r := range want.rings {
			got := s.rings.rings[r].points
			if !slices.Equal(got, want.rings[r].points) {
				t.Fatalf("round %d ring %d: rebuilt ring (%d points) differs from a full build (%d points)", round, r, len(got), len(want.rings[r].points))
			}
		}
	}
}

// An unchanged list keeps the rings as they are.
func TestRingUnchangedListKeepsRings(t *testing.T) {
	s, _ := mustNew(t, Config{}, 8)
	before := s.rings
	if err := s.SetInstances(pool(8)); err != nil {
		t.Fatal(err)
	}
	if s.rings != before {
		t.Error("SetInstances(same list) rebuilt the rings, want them kept")
	}
	if err := s.SetInstances(pool(9)); err != nil {
		t.Fatal(err)
	}
	if s.rings == before {
		t.Error("SetInstances(one more) kept the rings, want them rebuilt")
	}
}
