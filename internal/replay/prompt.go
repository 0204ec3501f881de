package replay

import (
	"fmt"
	"math"
	"strings"

	"github.com/dualmap/dualmap/internal/hashing"
)

// BytesPerToken is the text length per token of synthesised prompts: the
// byte approximation of package tokenize counts one token per 4 bytes.
const BytesPerToken = 4

// vocabulary holds the 64 words synthesised text is drawn from (6 bits of
// randomness per word).
const vocabulary = `the of and to in is was for on that with as by at from his
her it an are were which be this had not or have but their one all they she
been has more when who will no would there its if can about into out up
other some time only than them two then new first also after these so`

// tagLetters is the length of a block's leading tag word: 26^14 > 2^64, so
// the tag spells a 64-bit value in full.
const tagLetters = 14

// Prompter synthesises prompt text from trace block ids. Its output depends
// only on the seed, the block length and the ids, the same in every process
// and on every platform. It is safe for concurrent use.
type Prompter struct {
	key        uint64 // derived from the seed
	blockBytes int
	words      []string
}

// NewPrompter returns a Prompter whose block texts are
// max(1, round(BytesPerToken * blockTokens * scale)) bytes long. It panics
// if blockTokens < 1 or scale is not a positive finite number.
func NewPrompter(seed uint64, blockTokens int, scale float64) *Prompter {
	if blockTokens < 1 || !(scale > 0) || math.IsInf(scale, 1) {
		panic(fmt.Sprintf("replay: NewPrompter(%d, %d, %v): want blockTokens >= 1 and scale > 0", seed, blockTokens, scale))
	}
	n := max(1, int(math.Round(BytesPerToken*float64(blockTokens)*scale)))
	return &Prompter{key: hashing.SplitMix64(seed), blockBytes: n, words: strings.Fields(vocabulary)}
}

// BlockBytes returns the length of a block's text, in bytes.
func (p *Prompter) BlockBytes() int { return p.blockBytes }

// Block returns the text of block id: BlockBytes() bytes of lowercase
// ASCII words separated by single spaces. It starts with a tag word of 14
// letters that spells a bijection of id, so different ids differ in their
// first word (as long as BlockBytes() >= 14); the following words are drawn
// from a fixed vocabulary by a generator seeded with that same value.
func (p *Prompter) Block(id uint64) string {
	return string(p.appendBlock(make([]byte, 0, p.blockBytes), id, p.blockBytes))
}

// Prompt returns the prompt of a request whose blocks are blocks and whose
// (already scaled) prompt length is inputTokens: the blocks' texts
// concatenated and cut to BytesPerToken*inputTokens bytes, the last block
// used being truncated. If the blocks are too few to fill that length, the
// prompt goes on with the texts of derived ids, as if the trace had listed
// more blocks (ids following the last block's, so prompts that share all
// their blocks share this continuation too). It panics if inputTokens < 0.
func (p *Prompter) Prompt(blocks []uint64, inputTokens int) string {
	if inputTokens < 0 {
		panic(fmt.Sprintf("replay: Prompt: negative inputTokens %d", inputTokens))
	}
	need := BytesPerToken * inputTokens
	buf := make([]byte, 0, need)
	var last uint64
	for _, id := range blocks {
		if len(buf) == need {
			break
		}
		buf = p.appendBlock(buf, id, min(p.blockBytes, need-len(buf)))
		last = id
	}
	for len(buf) < need {
		last = hashing.SplitMix64(last)
		buf = p.appendBlock(buf, last, min(p.blockBytes, need-len(buf)))
	}
	return string(buf)
}

// appendBlock appends the first n bytes (n <= blockBytes) of block id's
// text to dst.
func (p *Prompter) appendBlock(dst []byte, id uint64, n int) []byte {
	end := len(dst) + n
	state := hashing.Mix64(id ^ p.key) // a bijection of id: tags of distinct ids differ
	var tag [tagLetters]byte
	for i, v := tagLetters-1, state; i >= 0; i-- {
		tag[i] = byte('a' + v%26)
		v /= 26
	}
	dst = appendUpTo(dst, end, string(tag[:]))
	for len(dst) < end {
		state += hashing.Golden
		z := hashing.Mix64(state)
		for k := 0; k < 10 && len(dst) < end; k++ {
			dst = appendUpTo(dst, end, " ")
			dst = appendUpTo(dst, end, p.words[z&63])
			z >>= 6
		}
	}
	return dst
}

// appendUpTo appends s to dst without letting dst grow beyond end bytes.
func appendUpTo(dst []byte, end int, s string) []byte {
	if room := end - len(dst); len(s) > room {
		s = s[:room]
	}
	return append(dst, s...)
}
