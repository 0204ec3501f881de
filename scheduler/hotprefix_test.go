package scheduler

import (
	"fmt"
	"math"
	"testing"
)

// hotBucket fills the table's current bucket with hot requests of the
// identical prompt hot (first) and unique cold prompts (the rest) until it
// closes, and returns the hot key's replica count then (0: not
// replicated).
func hotBucket(t *testing.T, k *keyDepth, hot []uint64, nhot int, cold *uint64) uint32 {
	t.Helper()
	n := rotateWith(k, func(i int) []uint64 {
		if i < nhot {
			return hot
		}
		*cold++
		return prompt(1<<20+*cold, *cold, 0, 4)
	})
	if want := k.cfg.Window / k.cfg.Buckets; n != want {
		t.Fatalf("a bucket closed after %d requests, want %d", n, want)
	}
	return k.replicas[k.key(hot, k.depth(hot))]
}

// A hot identical prompt is replicated over R = ceil(2 share / split
// threshold) candidate sets, at least 2 and at most MaxReplicas and twice
// the pool, and merges back to one set once it cools below the merge
// threshold (above it, once replicated, it keeps at least 2). Pins
// replicate(): the formula (2*share, /splitAt, the ceiling), the floor of
// 2, both clamps, the hysteresis (old > 1 && share >= mergeAt) and the
// merge back (delete of a cooled key), and the forgetting of a key no
// longer in the window.
func TestHotKeyReplicasAndMergeBack(t *testing.T) {
	// n = 8: split above 1/8 = 0.125 of the window, merge below 1/32.
	cfg := KeyDepthConfig{Window: 1000, Buckets: 10, MergeFactor: 0.25}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	hot := prompt(1, 1, 2, 2) // two blocks: the key is the whole prompt, it cannot grow
	key := k.key(hot, k.depth(hot))
	var cold uint64
	splitAt, mergeAt := k.thresholds()
	// The first bucket: 30 of 100 requests are the hot prompt (share 0.3,
	// R = ceil(4.8) = 5). Then only cold traffic: the hot prompt's 30
	// stay in the window while it fills (shares 30/200 .. 30/1000) and
	// leave it with the first bucket.
	got := []uint32{hotBucket(t, k, hot, 30, &cold)}
	for range 9 {
		got = append(got, hotBucket(t, k, hot, 0, &cold))
	}
	// Computed from the rule, not from the code: share 30/(100 i).
	want := make([]uint32, 10)
	old := uint32(0)
	for i := range want {
		share := 30 / float64(100*(i+1))
		var r uint32
		if share > splitAt || (old > 1 && share >= mergeAt) {
			r = max(2, uint32(math.Ceil(2*share/splitAt)))
		}
		want[i], old = r, r
	}
	if fmt.Sprint(want) != "[5 3 2 2 2 2 2 2 2 0]" {
		t.Fatalf("the test's own rule gives %v", want) // the trace below relies on these shares
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replica count after each bucket = %v, want %v (shares 0.3, 0.15, 0.1, ... 0.03; split above %g, merge below %g)", got, want, splitAt, mergeAt)
	}
	if _, ok := k.replicas[key]; ok {
		t.Errorf("the cooled key still has %d replicas, want it merged back", k.replicas[key])
	}
	hotBucket(t, k, hot, 0, &cold) // its first bucket left the window at the last rotation
	if _, ok := k.ends[key]; ok {
		t.Error("a key with no traffic left in the window is still tracked")
	}

	// The clamps: share 0.9 asks for ceil(2*0.9/(0.5/4)) = 15 sets.
	for _, tt := range []struct {
		name        string
		maxReplicas int
		want        uint32
	}{
		{"twice the pool", 0, 8},
		{"MaxReplicas", 3, 3},
		{"off", -1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := KeyDepthConfig{Window: 1000, Buckets: 10, SplitFactor: 0.5, MaxReplicas: tt.maxReplicas}.withDefaults()
			k := newKeyDepth(cfg, 4, 512)
			var cold uint64
			if got := hotBucket(t, k, hot, 90, &cold); got != tt.want {
				t.Errorf("replica count at share 0.9 in a pool of 4 = %d, want %d", got, tt.want)
			}
		})
	}
}
