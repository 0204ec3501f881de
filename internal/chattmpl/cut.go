package chattmpl

import (
	"sort"
	"strings"
)

// cutter finds where a rendered chat may be cut into pieces that a Hugging
// Face tokenizer encodes, one by one, to exactly the tokens of the whole:
// just before an added token that the tokenizer splits the text at first
// (it matches added tokens on the raw text, then normalizes and
// pre-tokenizes each stretch between them on its own). Tokens that strip
// the space to their left, match only whole words or match the normalized
// text are left out: cutting before them could change the tokens.
type cutter struct {
	byFirst map[byte][]string // tokens by first byte, longest first
	maxLen  int
}

func newCutter(added []AddedToken) cutter {
	c := cutter{byFirst: map[byte][]string{}}
	seen := map[string]bool{}
	for _, t := range added {
		if t.Content == "" || t.LStrip || t.SingleWord || t.Normalized || seen[t.Content] {
			continue
		}
		seen[t.Content] = true
		c.byFirst[t.Content[0]] = append(c.byFirst[t.Content[0]], t.Content)
		c.maxLen = max(c.maxLen, len(t.Content))
	}
	for _, list := range c.byFirst {
		sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	}
	return c
}

// matchAt returns the length of the longest token at s[i:], or 0.
func (c *cutter) matchAt(s string, i int) int {
	for _, t := range c.byFirst[s[i]] {
		if strings.HasPrefix(s[i:], t) {
			return len(t)
		}
	}
	return 0
}

// next returns the first offset at or after from where a token starts that
// no token starting earlier overlaps, or -1.
func (c *cutter) next(s string, from int) int {
	if len(c.byFirst) == 0 {
		return -1
	}
	for q := from; q < len(s); q++ {
		if c.matchAt(s, q) == 0 {
			continue
		}
		inside := false
		for b := max(0, q-c.maxLen+1); b < q && !inside; b++ {
			if n := c.matchAt(s, b); n > q-b {
				inside = true
			}
		}
		if !inside {
			return q
		}
	}
	return -1
}

// Cuts appends to dst the offsets, in increasing order and all in
// (0, len(text)), at which text, msgs' rendering, may be cut (see cutter):
// at most one per message, the first cut point after the end of that
// message's content, trimmed (looked for in text in order), so that a chat that
// repeats an earlier one's messages and adds more cuts that earlier
// rendering the same way, and each piece can be cached. Without cut points
// (a template whose markers are plain text, or no added tokens known) it
// appends nothing: the text must then be encoded whole.
//
// A content is looked for within searchWindow bytes past the previous cut
// (the template's text between them, headers and preambles, is shorter), and
// after maxMisses contents not found it stops cutting: the rest is one piece,
// so the search costs at most a few passes over text whatever the chat.
func (t *Template) Cuts(text string, msgs []Message, dst []int) []int {
	p, last, misses := 0, 0, 0
	for i := range msgs {
		// Templates often trim the content; look for what any would print.
		if c := strings.TrimSpace(msgs[i].Content); c != "" {
			j := index(text[:min(len(text), p+len(c)+searchWindow)], c, p)
			if j < 0 {
				if misses++; misses > maxMisses {
					break
				}
			} else {
				p = j + len(c)
			}
		}
		q := t.cuts.next(text, max(p, last+1))
		if q < 0 {
			break
		}
		dst = append(dst, q)
		last, p = q, q
	}
	return dst
}

// Bounds of Cuts' search for message contents.
const (
	searchWindow = 256 << 10
	maxMisses    = 8
)

// index returns the first offset at or after from where s holds sub (not
// empty), or -1. It looks for a short prefix of sub first, which the
// standard library finds with vector instructions, and compares the rest
// there: chat messages are long needles.
func index(s, sub string, from int) int {
	head := sub[:min(len(sub), 32)]
	for from <= len(s)-len(sub) {
		j := strings.Index(s[from:], head)
		if j < 0 {
			return -1
		}
		if strings.HasPrefix(s[from+j:], sub) {
			return from + j
		}
		from += j + 1
	}
	return -1
}
