package tokenize

import "math/bits"

// Blocks appends to dst[:0] the chained block hashes of tokens cut into
// blocks of blockSize tokens, and returns the result: ceil(len(tokens)/
// blockSize) values, the last block possibly partial. It does not allocate
// when dst has the capacity. It panics if blockSize < 1.
//
// Block i's value is a 64-bit hash of block i-1's value (0 for block 0), the
// number of tokens in block i and its token ids, so equal values at block i
// mean (barring a collision) equal tokens in blocks 0..i, and a change in
// block k changes the values of blocks k and later only. The hash is fixed:
// a murmur3-style mix of the parent value and the ids, taken two at a time as
// little-endian 64-bit words, finished with murmur3's fmix64. It is the same
// in every process and on every platform; the router and the simulated model
// server rely on that.
func Blocks(tokens []uint32, blockSize int, dst []uint64) []uint64 {
	c := newChain(blockSize, dst[:0])
	c.write(tokens)
	return c.finish()
}

// chain computes chained block hashes over tokens written in any number of
// pieces: the result depends only on the concatenation of the pieces.
type chain struct {
	size   int      // tokens per block
	parent uint64   // value of the last closed block (0 before the first)
	h      uint64   // running state of the open block
	n      int      // tokens in the open block
	half   uint32   // the open block's unpaired token, when n is odd
	dst    []uint64 // values of the closed blocks
}

func newChain(blockSize int, dst []uint64) chain {
	if blockSize < 1 {
		panic("tokenize: block size must be positive")
	}
	return chain{size: blockSize, h: blockStart(0), dst: dst}
}

// write feeds the next tokens of the sequence.
func (c *chain) write(ids []uint32) {
	for len(ids) > 0 {
		if c.n == 0 && len(ids) >= c.size {
			c.parent = hashBlock(c.parent, ids[:c.size])
			c.dst = append(c.dst, c.parent)
			c.h = blockStart(c.parent)
			ids = ids[c.size:]
			continue
		}
		take := min(c.size-c.n, len(ids))
		for _, id := range ids[:take] {
			if c.n&1 == 1 {
				c.h = blockRound(c.h, uint64(c.half)|uint64(id)<<32)
			} else {
				c.half = id
			}
			c.n++
		}
		ids = ids[take:]
		if c.n == c.size {
			c.close()
		}
	}
}

// finish closes the partial last block, if any, and returns the values.
func (c *chain) finish() []uint64 {
	if c.n > 0 {
		c.close()
	}
	return c.dst
}

func (c *chain) close() {
	if c.n&1 == 1 {
		c.h = blockRound(c.h, uint64(c.half))
	}
	c.parent = blockEnd(c.h, c.n)
	c.dst = append(c.dst, c.parent)
	c.h = blockStart(c.parent)
	c.n = 0
}

// hashBlock is the value of a whole block of ids whose parent value is
// parent; chain.write's token-at-a-time path computes the same.
func hashBlock(parent uint64, ids []uint32) uint64 {
	h := blockStart(parent)
	i := 0
	for ; i+2 <= len(ids); i += 2 {
		h = blockRound(h, uint64(ids[i])|uint64(ids[i+1])<<32)
	}
	if i < len(ids) {
		h = blockRound(h, uint64(ids[i]))
	}
	return blockEnd(h, len(ids))
}

const (
	blockSeed = 0x9e3779b97f4a7c15 // golden ratio: keeps parent 0 from starting at 0
	mulK1     = 0x87c37b91114253d5 // murmur3 x64 constants
	mulK2     = 0x4cf5ad432745937f
)

func blockStart(parent uint64) uint64 { return parent ^ blockSeed }

// blockRound mixes one 64-bit word into h; for a fixed h it is a bijection
// of w and for a fixed w a bijection of h, so no word is ever absorbed.
func blockRound(h, w uint64) uint64 {
	w *= mulK1
	w = bits.RotateLeft64(w, 31)
	w *= mulK2
	h ^= w
	h = bits.RotateLeft64(h, 27)
	return h*5 + 0x52dce729
}

// blockEnd folds in the block's token count (so a zero-padded odd block
// differs from one ending in a real 0 token) and finalizes.
func blockEnd(h uint64, n int) uint64 {
	h ^= uint64(n)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
