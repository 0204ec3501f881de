package trace

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Reblock re-cuts, in place, every request's prompt into blocks of size
// tokens and sets t.BlockSize to size. from is the length in tokens of the
// blocks the ids describe now; it may be fractional, as after scaling a
// trace's token counts (a 512-token block of a trace scaled by 0.25 is 128
// tokens long), and the ids are taken as a replayer synthesising prompts
// from them does (package replay): block k of the current ids covers tokens
// [k·from, (k+1)·from) of the prompt, and a prompt longer than its blocks
// goes on with text derived from its last block.
//
// Block j of the result covers tokens [j·size, min((j+1)·size,
// InputTokens)); its id stands for the pair (the id of block j-1, the ids
// of the current blocks it overlaps, its length in tokens), numbered 0, 1,
// ... in order of first appearance. So the new ids are chained again (equal
// ids, equal prefixes), each id has one length (a last block cut short is a
// different block from the full one, as loaders that synthesise a fixed
// number of tokens per id require), and two prompts share a new block only
// if they shared all the old blocks it overlaps: reuse finer than size
// tokens is lost, never invented. len(Blocks) becomes
// ceil(InputTokens/size).
//
// It fails, leaving t unchanged, with ErrInvalidArgument if size < 1 or
// from is not a positive finite number.
func (t *Trace) Reblock(from float64, size int) error {
	if size < 1 || !(from > 0) || math.IsInf(from, 1) {
		return fmt.Errorf("trace: Reblock(%v, %d): %w: want from > 0 and finite, size >= 1", from, size, ErrInvalidArgument)
	}
	ids := make(map[string]uint64)
	var key []byte
	for i := range t.Requests {
		r := &t.Requests[i]
		n := (r.InputTokens + size - 1) / size
		blocks := make([]uint64, n)
		parent := uint64(math.MaxUint64) // no block before the first
		for j := range n {
			start, end := j*size, min((j+1)*size, r.InputTokens)
			first := int(math.Floor(float64(start) / from))
			last := int(math.Ceil(float64(end)/from)) - 1 // overlapped: [first, last]
			key = binary.AppendUvarint(key[:0], parent)
			key = binary.AppendUvarint(key, uint64(end-start))
			for k := first; k <= last && k < len(r.Blocks); k++ {
				key = binary.AppendUvarint(key, r.Blocks[k])
			}
			id, ok := ids[string(key)]
			if !ok {
				id = uint64(len(ids))
				ids[string(key)] = id
			}
			blocks[j] = id
			parent = id
		}
		r.Blocks = blocks
	}
	t.BlockSize = size
	return nil
}
