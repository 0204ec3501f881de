package hashing

import "math/bits"

// The hash of a block of token ids is a murmur3-style (x64) mix of the
// parent block's value and the ids, taken two at a time as little-endian
// 64-bit words, finished with murmur3's fmix64 after folding in the count.
// Block computes it for a whole block; BlockStart, BlockWord and BlockEnd
// are its steps, for callers that receive a block's ids in pieces:
//
//	h := BlockStart(parent)
//	h = BlockWord(h, uint64(ids[0])|uint64(ids[1])<<32) // and so on
//	h = BlockWord(h, uint64(ids[n-1]))                  // if n is odd
//	v := BlockEnd(h, n)                                 // v == Block(parent, ids)

const (
	blockSeed = Golden             // keeps parent 0 from starting at 0
	mulK1     = 0x87c37b91114253d5 // murmur3 x64 constants
	mulK2     = 0x4cf5ad432745937f
)

// Block returns the hash of a block of ids whose parent block hashed to
// parent (0 for the first block). A change in parent or in any id changes
// the value, barring a 64-bit collision.
func Block(parent uint64, ids []uint32) uint64 {
	h := BlockStart(parent)
	i := 0
	for ; i+2 <= len(ids); i += 2 {
		h = BlockWord(h, uint64(ids[i])|uint64(ids[i+1])<<32)
	}
	if i < len(ids) {
		h = BlockWord(h, uint64(ids[i]))
	}
	return BlockEnd(h, len(ids))
}

// BlockStart returns the state of a block hash before its first word.
func BlockStart(parent uint64) uint64 { return parent ^ blockSeed }

// BlockWord mixes one 64-bit word into state h; for a fixed h it is a
// bijection of w and for a fixed w a bijection of h, so no word is ever
// absorbed.
func BlockWord(h, w uint64) uint64 {
	w *= mulK1
	w = bits.RotateLeft64(w, 31)
	w *= mulK2
	h ^= w
	h = bits.RotateLeft64(h, 27)
	return h*5 + 0x52dce729
}

// BlockEnd folds the block's token count n into state h (so a zero-padded
// odd block differs from one ending in a real 0 token) and finalises.
func BlockEnd(h uint64, n int) uint64 {
	h ^= uint64(n)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
