package trace

import "github.com/dualmap/dualmap/internal/hashing"

// chainSeed stands for the empty prefix in chainIDs.
const chainSeed = 0x243f6a8885a308d3

// chainID returns the chained value of a block with content id after a
// prefix whose chained value is prev: id hashed under prev as the seed,
//
//	chainID(prev, id) = hashing.Seeded(prev, id) = Mix64(Mix64(prev + Golden) ^ id)
//
// For a fixed prev it is a bijection of id, and for a fixed id a bijection
// of prev, so two prefixes get equal values only by a 64-bit collision
// (probability about n²/2^65 among n distinct prefixes).
func chainID(prev, id uint64) uint64 { return hashing.Seeded(prev, id) }

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
// b -> Mix64(Mix64(b) + key), key = Mix64(salt + c*Golden) (see package
// hashing). It is a bijection, so it keeps the chained property, and
// distinct copies get distinct keys, so their ids are disjoint up to 64-bit
// collisions.
func replicaMap(salt uint64, c int) func(uint64) uint64 {
	key := hashing.Mix64(salt + uint64(c)*hashing.Golden)
	return func(b uint64) uint64 { return hashing.Mix64(hashing.Mix64(b) + key) }
}
