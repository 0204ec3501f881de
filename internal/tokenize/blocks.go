package tokenize

import "github.com/dualmap/dualmap/internal/hashing"

// Blocks appends to dst[:0] the chained block hashes of tokens cut into
// blocks of blockSize tokens, and returns the result: ceil(len(tokens)/
// blockSize) values, the last block possibly partial. It does not allocate
// when dst has the capacity. It panics if blockSize < 1.
//
// Block i's value is a 64-bit hash of block i-1's value (0 for block 0), the
// number of tokens in block i and its token ids, so equal values at block i
// mean (barring a collision) equal tokens in blocks 0..i, and a change in
// block k changes the values of blocks k and later only. The hash is
// hashing.Block: fixed, and the same in every process and on every platform;
// the router and the simulated model server rely on that.
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
	return chain{size: blockSize, h: hashing.BlockStart(0), dst: dst}
}

// write feeds the next tokens of the sequence.
func (c *chain) write(ids []uint32) {
	for len(ids) > 0 {
		if c.n == 0 && len(ids) >= c.size {
			c.parent = hashing.Block(c.parent, ids[:c.size])
			c.dst = append(c.dst, c.parent)
			c.h = hashing.BlockStart(c.parent)
			ids = ids[c.size:]
			continue
		}
		take := min(c.size-c.n, len(ids))
		for _, id := range ids[:take] {
			if c.n&1 == 1 {
				c.h = hashing.BlockWord(c.h, uint64(c.half)|uint64(id)<<32)
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
		c.h = hashing.BlockWord(c.h, uint64(c.half))
	}
	c.parent = hashing.BlockEnd(c.h, c.n)
	c.dst = append(c.dst, c.parent)
	c.h = hashing.BlockStart(c.parent)
	c.n = 0
}
