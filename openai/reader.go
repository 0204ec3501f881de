package openai

import (
	"encoding/binary"
	"math/bits"

	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of arrays and objects the reader accepts;
// it bounds the recursion in skip and canon. Python's json module, which most
// serving engines use, gives up at about the same depth.
const maxDepth = 1000

// reader is a cursor over one JSON document (RFC 8259). It validates the
// syntax of everything it reads or skips and reports errors as *Error with
// CodeInvalidJSON and the byte offset. It assumes the input is valid UTF-8
// (Parse checks that first), so strings it returns are valid UTF-8 too:
// escaped lone surrogates decode to U+FFFD, as in encoding/json.
//
// The value readers expect the caller to have looked at the next byte with
// peek and to call the reader for that kind of value.
type reader struct {
	data    []byte
	pos     int
	depth   int
	scratch []byte // reused to decode strings with escapes; see readString
}

// peek skips whitespace and returns the next byte, or 0 at the end of input.
func (r *reader) peek() byte {
	for r.pos < len(r.data) {
		switch c := r.data[r.pos]; c {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return c
		}
	}
	return 0
}

// atEnd reports whether only whitespace is left.
func (r *reader) atEnd() bool {
	r.peek()
	return r.pos >= len(r.data)
}

// unexpected reports the byte at r.pos as a syntax error; context says what
// the reader was looking for.
func (r *reader) unexpected(context string) *Error {
	if r.pos >= len(r.data) {
		return errSyntax(r.pos, "unexpected end of input %s", context)
	}
	c, _ := utf8.DecodeRune(r.data[r.pos:])
	return errSyntax(r.pos, "invalid character %q %s", c, context)
}

// typeErr reports the value at r.pos as having the wrong type, or as a
// syntax error if it does not start a JSON value at all.
func (r *reader) typeErr(p *param, want string) *Error {
	c := r.peek()
	if r.pos >= len(r.data) || !isValueStart(c) {
		return r.unexpected("looking for beginning of value")
	}
	return errType(p, want, c)
}

// document checks that the input is exactly one JSON value.
func (r *reader) document() error {
	if err := r.skip(); err != nil {
		return err
	}
	return r.end()
}

// end checks that only whitespace follows the value just read.
func (r *reader) end() error {
	if !r.atEnd() {
		return r.unexpected("after top-level value")
	}
	return nil
}

// open consumes the '{' or '[' at r.pos and enters one level of nesting.
func (r *reader) open() error {
	if r.depth >= maxDepth {
		return errSyntax(r.pos, "arrays and objects nested deeper than %d levels", maxDepth)
	}
	r.depth++
	r.pos++
	return nil
}

// nextKey moves to the next member of the object being read, after open:
// first says whether any member was read yet. It returns the member's
// decoded key with the reader positioned on the value, or ok == false after
// consuming the closing '}'. The key may alias the input; it is valid until
// the next read.
func (r *reader) nextKey(first bool) (key []byte, ok bool, err error) {
	c := r.peek()
	if c == '}' {
		r.pos++
		r.depth--
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, r.unexpected("after object member")
		}
		r.pos++
		c = r.peek()
	}
	if c != '"' {
		return nil, false, r.unexpected("looking for beginning of object key string")
	}
	if key, err = r.readString(nil, strView); err != nil {
		return nil, false, err
	}
	if r.peek() != ':' {
		return nil, false, r.unexpected("after object key")
	}
	r.pos++
	return key, true, nil
}

// nextElem moves to the next element of the array being read, after open:
// first says whether any element was read yet. It returns ok == false after
// consuming the closing ']'.
func (r *reader) nextElem(first bool) (ok bool, err error) {
	c := r.peek()
	if c == ']' {
		r.pos++
		r.depth--
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, r.unexpected("after array element")
		}
		r.pos++
	}
	return true, nil
}

// skip reads and validates one value of any type, and discards it.
func (r *reader) skip() error {
	switch c := r.peek(); c {
	case '{':
		if err := r.open(); err != nil {
			return err
		}
		for first := true; ; first = false {
			_, ok, err := r.nextKey(first)
			if err != nil || !ok {
				return err
			}
			if err := r.skip(); err != nil {
				return err
			}
		}
	case '[':
		if err := r.open(); err != nil {
			return err
		}
		for first := true; ; first = false {
			ok, err := r.nextElem(first)
			if err != nil || !ok {
				return err
			}
			if err := r.skip(); err != nil {
				return err
			}
		}
	case '"':
		_, err := r.readString(nil, strSkip)
		return err
	case 't':
		return r.literal("true")
	case 'f':
		return r.literal("false")
	case 'n':
		return r.literal("null")
	default:
		_, err := r.readNumber()
		return err
	}
}

// literal consumes the literal word (true, false or null) at r.pos.
func (r *reader) literal(word string) error {
	rest := r.data[r.pos:]
	for i := 0; i < len(word); i++ {
		if i >= len(rest) || rest[i] != word[i] {
			r.pos += i
			return r.unexpected("in literal " + word)
		}
	}
	r.pos += len(word)
	return nil
}

// readNumber consumes the number at r.pos and returns its text, which
// aliases the input.
func (r *reader) readNumber() ([]byte, error) {
	d := r.data
	start, i := r.pos, r.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i+1)
	default:
		r.pos = i
		if i == start {
			return nil, r.unexpected("looking for beginning of value")
		}
		return nil, r.unexpected("in numeric literal")
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			r.pos = j
			return nil, r.unexpected("after decimal point in numeric literal")
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			r.pos = j
			return nil, r.unexpected("in exponent of numeric literal")
		}
		i = j
	}
	r.pos = i
	return d[start:i], nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

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
