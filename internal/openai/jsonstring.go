package openai

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// This file decodes JSON strings: the one hot loop of the package, since
// prompt text is almost all of a request body.

// How readString returns the string it reads.
type strMode uint8

const (
	strSkip   strMode = iota // validate only
	strAppend                // append the decoded string to dst
	strView                  // return a view, valid until the next read
)

// readString consumes the string at r.pos (which must be '"'). In strAppend
// mode it returns dst with the decoded string appended. In strView mode it
// returns the decoded string in the input (no escapes) or the reader's
// scratch buffer (escapes), valid only until the next read and with no spare
// capacity, so appending to it copies. In strSkip mode it only validates.
func (r *reader) readString(dst []byte, mode strMode) ([]byte, error) {
	d := r.data
	start := r.pos + 1
	i := start + plainRun(d[start:])
	if i < len(d) && d[i] == '"' {
		r.pos = i + 1
		switch mode {
		case strView:
			return d[start:i:i], nil
		case strAppend:
			return append(dst, d[start:i]...), nil
		default:
			return nil, nil
		}
	}
	keep := mode != strSkip
	var out []byte
	switch mode {
	case strAppend:
		out = dst
	case strView:
		out = r.scratch[:0]
	}
	if keep {
		out = append(out, d[start:i]...)
	}
	for {
		if i >= len(d) {
			r.pos = i
			return nil, r.unexpected("in string literal")
		}
		switch c := d[i]; {
		case c == '"':
			r.pos = i + 1
			if mode == strView {
				r.scratch = out
				return out[:len(out):len(out)], nil
			}
			return out, nil
		case c < 0x20:
			r.pos = i
			return nil, r.unexpected("in string literal")
		case c == '\\':
			if i+1 < len(d) {
				if e := simpleEscape(d[i+1]); e != 0 {
					if keep {
						out = append(out, e)
					}
					i += 2
					continue
				}
			}
			var ok bool
			if out, i, ok = unescape(out, d, i, keep); !ok {
				r.pos = i
				return nil, r.unexpected("in string escape code")
			}
		default:
			j := i + plainRun(d[i:])
			if keep {
				out = append(out, d[i:j]...)
			}
			i = j
		}
	}
}

// unescape decodes the escape sequence at d[i] (a backslash), appending it
// to out when keep. It returns the index after the sequence, or ok == false
// and the index of the offending byte.
func unescape(out, d []byte, i int, keep bool) ([]byte, int, bool) {
	if i+1 >= len(d) {
		return out, i + 1, false
	}
	var c byte
	switch d[i+1] {
	case '"', '\\', '/':
		c = d[i+1]
	case 'b':
		c = '\b'
	case 'f':
		c = '\f'
	case 'n':
		c = '\n'
	case 'r':
		c = '\r'
	case 't':
		c = '\t'
	case 'u':
		rr, ok := hex4(d, i+2)
		if !ok {
			return out, i + 1, false
		}
		i += 6
		if utf16.IsSurrogate(rr) {
			// A high surrogate followed by an escaped low one is one rune;
			// anything else is a lone surrogate and decodes to U+FFFD. The
			// following escape, if not consumed here, is read on its own.
			lo, ok := hex4(d, i+2)
			if ok && d[i] == '\\' && d[i+1] == 'u' {
				if dec := utf16.DecodeRune(rr, lo); dec != utf8.RuneError {
					rr = dec
					i += 6
				} else {
					rr = utf8.RuneError
				}
			} else {
				rr = utf8.RuneError
			}
		}
		if keep {
			out = utf8.AppendRune(out, rr)
		}
		return out, i, true
	default:
		return out, i + 1, false
	}
	if keep {
		out = append(out, c)
	}
	return out, i + 2, true
}

// simpleEscape returns the byte that the one-letter escape \\c stands for,
// or 0 if c does not make one (it may start \\u or be invalid).
func simpleEscape(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	}
	return 0
}

// hex4 decodes the four hex digits at d[i:], if there are four.
func hex4(d []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(d) {
		return 0, false
	}
	var v rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainRun returns the length of the prefix of b that a string can hold
// as-is: no '"', no '\\' and no control character. It tests eight bytes at a
// time; in each test the lowest flagged byte is always a real hit (borrows
// only spill upwards), so the first hit is found exactly.
func plainRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (lsb * '"')
		s := x ^ (lsb * '\\')
		if m := ((x-lsb*0x20)&^x | (q-lsb)&^q | (s-lsb)&^s) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}
