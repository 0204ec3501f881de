package trace

import "github.com/dualmap/dualmap/internal/mix"

// golden is 2^64 divided by the golden ratio, the SplitMix64 increment.
const golden = mix.Golden

// chainSeed stands for the empty prefix in chainIDs.
const chainSeed = 0x243f6a8885a308d3

// mix64 is the shared SplitMix64 finaliser.
func mix64(x uint64) uint64 { return mix.Mix64(x) }

// chainID returns the chained value of a block with content id after a
// prefix whose chained value is prev:
//
//	chainID(prev, id) = mix64(mix64(prev + golden) ^ id)
//
// For a fixed prev it is a bijection of id, and for a fixed id a bijection
// of prev, so two prefixes get equal values only by a 64-bit collision
// (probability about n²/2^65 among n distinct prefixes).
func chainID(prev, id uint64) uint64 { return mix64(mix64(prev+golden) ^ id) }

// chainIDs turns per-block content ids into chained values in place:
// ids[j] becomes chainID(ids'[j-1], ids[j]), with chainSeed before the first
// block, so the value at j identifies the whole prefix ids[0..j].
func chainIDs(ids []uint64) {
	prev := uint64(chainSeed)
	for j, id := range ids {
		prev = chainID(prev, id)
		ids[j] = prev
	}
}

// replicaMap returns the block-id mapping of copy c >= 1 made by Replicate:
// b -> mix64(mix64(b) + key), key = mix64(salt + c*golden). It is a
// bijection, so it keeps the chained property, and distinct copies get
// distinct keys, so their ids are disjoint up to 64-bit collisions.
func replicaMap(salt uint64, c int) func(uint64) uint64 {
	key := mix64(salt + uint64(c)*golden)
	return func(b uint64) uint64 { return mix64(mix64(b) + key) }
}
