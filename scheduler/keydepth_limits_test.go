package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// rotateWith observes requests until the table closes its current bucket
// (count-based windows rotate after Window/Buckets requests): next(i)
// gives the i-th request's blocks. It returns how many requests that took.
func rotateWith(k *keyDepth, next func(i int) []uint64) int {
	before := k.rotations
	i := 0
	for ; k.rotations == before; i++ {
		b := next(i)
		k.observe(b, k.depth(b), 0)
	}
	return i
}

// Many hot prefixes, few slots: the table never holds more than MaxSplits
// splits, and the ones it holds are the hottest.
func TestKeyDepthMaxSplits(t *testing.T) {
	for _, maxSplits := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("max_splits=%d", maxSplits), func(t *testing.T) {
			const n = 8 // split above 1/8 of the traffic
			k := newKeyDepth(KeyDepthConfig{Window: 1000, MaxSplits: maxSplits}.withDefaults(), n, 512)
			// Six prefixes of 6 shared blocks take 22%, 19%, 17%, 15%, 14%
			// and 13% of the traffic: each over the threshold at depth 2
			// and, through the look-ahead, at depth 3, so there are 12
			// candidates for the slots.
			weights := []int{22, 19, 17, 15, 14, 13}
			var seq []uint64
			for p, w := range weights {
				for range w {
					seq = append(seq, uint64(p+1))
				}
			}
			u := uint64(0)
			next := func(i int) []uint64 {
				u++
				return prompt(seq[i%len(seq)], u, 6, 8)
			}
			for range 30 {
				rotateWith(k, next)
				if len(k.split) > maxSplits {
					t.Fatalf("after %d rotations: %d splits, want <= MaxSplits %d", k.rotations, len(k.split), maxSplits)
				}
			}
			if len(k.split) != maxSplits {
				t.Errorf("%d splits with 12 prefixes over the threshold, want all %d slots used", len(k.split), maxSplits)
			}
			// The hottest prefix holds a slot: its depth-2 key, or deeper.
			hot := prompt(1, 1<<40, 6, 8)
			if d := k.depth(hot); d < 3 {
				t.Errorf("depth() of the hottest prefix = %d, want it split (>= 3)", d)
			}
			// And no split is of a prefix outside the six.
			var known []uint64
			for p := range weights {
				b := prompt(uint64(p+1), 1<<40, 6, 8)
				known = append(known, b[:6]...)
			}
			for h := range k.split {
				if !slices.Contains(known, h) {
					t.Errorf("split %x is not a shared prefix", h)
				}
			}
		})
	}
}

// A split imported from the leader is held here for a whole window before
// this table's own (cold) counts can merge it, as a split of its own would
// be; one it already had keeps its age.
func TestKeyDepthImportedSplitsHeldAWindow(t *testing.T) {
	cfg := KeyDepthConfig{Window: 1000}.withDefaults() // 10 buckets of 100
	k := newKeyDepth(cfg, 8, 512)
	u := uint64(0)
	cold := func(int) []uint64 { u++; return prompt(u, u, 0, 8) }
	for range 3 * cfg.Buckets { // run the table for a while: its clock is far from zero
		rotateWith(k, cold)
	}
	hot := prompt(77, 1, 6, 8)
	imported := hot[1] // the depth-2 key of a prefix this table never saw
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	for i := 1; i < cfg.Buckets; i++ {
		rotateWith(k, cold)
		if k.depth(hot) != 3 {
			t.Fatalf("%d rotations after the import: depth() = %d, want 3 (held for %d rotations)", i, k.depth(hot), cfg.Buckets)
		}
	}
	rotateWith(k, cold)
	if d := k.depth(hot); d != 2 {
		t.Errorf("%d rotations after the import: depth() = %d, want 2 (merged once held a window)", cfg.Buckets, d)
	}

	// Imported again (the leader republishes its table every round): a
	// split this table already has keeps its age, so it merges when its
	// first hold ends, not a window after the last import.
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	for range cfg.Buckets - 1 {
		rotateWith(k, cold)
	}
	k.importState(KeyDepthState{Splits: []uint64{imported}})
	if d := k.depth(hot); d != 3 {
		t.Fatalf("re-imported: depth() = %d, want 3", d)
	}
	rotateWith(k, cold)
	if d := k.depth(hot); d != 2 {
		t.Errorf("a split held %d rotations, imported again: depth() = %d after one more rotation, want 2 (merged)", cfg.Buckets-1, d)
	}
}

// The look-ahead counts one block past a request's key (the whole prompt
// once the key is split), so a prefix hot several blocks deep splits two
// levels in the first rotation and the rest in the second: its key grows
// from 2 to past the shared part in 2 rotations instead of 5.
func TestKeyDepthLookAheadRotations(t *testing.T) {
	cfg := KeyDepthConfig{Window: 1000}.withDefaults()
	k := newKeyDepth(cfg, 8, 512)
	u := uint64(0)
	// Half the traffic shares 6 blocks, the rest is unique.
	next := func(i int) []uint64 {
		u++
		if i%2 == 0 {
			return prompt(5, u, 6, 10)
		}
		return prompt(u, u, 0, 10)
	}
	probe := prompt(5, 1<<40, 6, 10)
	want := []int{4, 7, 7, 7, 7} // depth after each rotation; 7 is one block past the shared six
	var got []int
	for range want {
		if n := rotateWith(k, next); n != cfg.Window/cfg.Buckets {
			t.Fatalf("a bucket closed after %d requests, want Window/Buckets = %d", n, cfg.Window/cfg.Buckets)
		}
		got = append(got, k.depth(probe))
	}
	if !slices.Equal(got, want) {
		t.Errorf("depth() after each rotation = %v, want %v", got, want)
	}
}

// feedBucket observes one bucket's worth of requests (Window/Buckets), hot
// of them under prefix 60 (4 shared blocks), the rest unique.
func feedBucket(k *keyDepth, hot int, next *uint64) {
	per := k.cfg.Window / k.cfg.Buckets
	for i := range per {
		*next++
		b := prompt(*next, *next, 0, 6)
		if i < hot {
			b = prompt(60, *next, 4, 6)
		}
		k.observe(b, k.depth(b), 0)
	}
}

// The thresholds are strict: a prefix at exactly SplitFactor/n of the
// window does not split, at exactly MergeFactor/n it does not merge.
func TestKeyDepthThresholdsAreStrict(t *testing.T) {
	const n = 8 // split above 1/8 = 10 of 80, merge below 1/16 = 5 of 80
	k := newKeyDepth(KeyDepthConfig{Window: 800, Buckets: 10}.withDefaults(), n, 512)
	probe := prompt(60, 1<<40, 4, 6)
	var next uint64 = 1 << 30
	for range 20 {
		feedBucket(k, 10, &next)
	}
	if d := k.depth(probe); d != 2 {
		t.Fatalf("depth() at exactly 1/n of the traffic = %d, want 2 (not split)", d)
	}
	feedBucket(k, 11, &next)
	if d := k.depth(probe); d < 3 {
		t.Fatalf("depth() just over 1/n = %d, want split (>= 3)", d)
	}
	for i := range 30 {
		feedBucket(k, 5, &next)
		if d := k.depth(probe); d < 3 {
			t.Fatalf("bucket %d at exactly MergeFactor/n: depth() = %d, want still split", i, d)
		}
	}
	for range 12 {
		feedBucket(k, 4, &next)
	}
	if d := k.depth(probe); d != 2 {
		t.Errorf("depth() after a window below MergeFactor/n = %d, want 2 (merged)", d)
	}
}

// A time-based window closes a bucket every WindowDuration/Buckets, to the
// nanosecond, on a grid from the first bucket; after an idle gap longer
// than the window everything counted is forgotten and the merge clock
// moves on by a window, the grid restarting at the step the gap ended in.
func TestKeyDepthTimeWindowBuckets(t *testing.T) {
	cfg := KeyDepthConfig{WindowDuration: 10 * time.Second}.withDefaults() // 1 s buckets
	k := newKeyDepth(cfg, 8, 512)
	obs := func(at time.Duration) {
		b := prompt(70, uint64(at), 4, 6)
		k.observe(b, k.depth(b), at)
	}
	obs(500 * time.Millisecond)
	obs(time.Second - 1)
	if k.rotations != 0 {
		t.Fatalf("rotations before 1 s = %d, want 0", k.rotations)
	}
	obs(time.Second)
	if k.rotations != 1 {
		t.Fatalf("rotations at exactly 1 s = %d, want 1", k.rotations)
	}
	obs(3500 * time.Millisecond)
	if k.rotations != 3 {
		t.Fatalf("rotations at 3.5 s = %d, want 3", k.rotations)
	}
	// Idle from 3.5 s to 100.3 s: one rotation closes the last bucket, then
	// the window that passed counts as Buckets-1 more; the grid restarts at
	// 100 s.
	obs(100300 * time.Millisecond)
	if want := uint64(3 + 1 + cfg.Buckets - 1); k.rotations != want || k.total != 1 {
		t.Fatalf("after the gap: rotations %d, total %d, want %d and 1 (the new request only)", k.rotations, k.total, want)
	}
	obs(101*time.Second - 1)
	if want := uint64(3 + cfg.Buckets); k.rotations != want {
		t.Errorf("rotations just before 101 s = %d, want %d", k.rotations, want)
	}
	obs(101 * time.Second)
	if want := uint64(3 + cfg.Buckets + 1); k.rotations != want {
		t.Errorf("rotations at 101 s = %d, want %d", k.rotations, want)
	}
	// A gap of exactly a window and a step is idle: one rotation and a
	// window's worth, not eleven one by one.
	obs(112 * time.Second)
	if want := uint64(3 + cfg.Buckets + 1 + cfg.Buckets); k.rotations != want || k.total != 1 {
		t.Errorf("after a gap of exactly window+step: rotations %d, total %d, want %d and 1", k.rotations, k.total, want)
	}
}

// A count-based window ignores the clock: it closes a bucket every
// Window/Buckets requests however much time passes.
func TestKeyDepthCountWindowIgnoresTime(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{Window: 800, Buckets: 10}.withDefaults(), 8, 512)
	for i := range 79 {
		b := prompt(uint64(i), uint64(i), 0, 6)
		k.observe(b, k.depth(b), time.Duration(i)*time.Minute)
	}
	if k.rotations != 0 || k.total != 79 {
		t.Errorf("after 79 requests over 79 minutes: rotations %d, total %d, want 0 and 79", k.rotations, k.total)
	}
}

// A key never grows past the prompt: when one whole prompt is hot, its key
// is the whole prompt, however much of it is split.
func TestKeyDepthNeverPastThePrompt(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{Window: 1000}.withDefaults(), 8, 512)
	same := prompt(80, 80, 3, 3) // one 3-block prompt, half the traffic
	u := uint64(0)
	for range 20 {
		rotateWith(k, func(i int) []uint64 {
			if i%2 == 0 {
				return same
			}
			u++
			return prompt(u, u, 0, 3)
		})
	}
	if len(k.split) == 0 {
		t.Fatal("the hot prompt never split")
	}
	if d := k.depth(same); d != 3 {
		t.Errorf("depth() of a hot 3-block prompt = %d, want 3", d)
	}
}
