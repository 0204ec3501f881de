package scheduler

import (
	"math/rand/v2"
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
