package openai

import "unicode/utf8"

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
// consuming the closing '}'. The key is a view (see readString): valid only
// until the next read.
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

// readNumber consumes the number at r.pos and returns its text, a view of
// the input with no spare capacity.
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
	return d[start:i:i], nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}
