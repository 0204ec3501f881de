package kvevents

import (
	"encoding/binary"
	"errors"
	"math"
)

// A bounded MessagePack reader over one frame, written for this package
// rather than taken from a general-purpose library: events are read in
// place (strings and binaries are sub-slices of the frame, integers are
// read straight into the decoder's reused buffers), every length is
// checked against the bytes left before anything is allocated (an array
// of n elements needs at least n bytes), and any value can be skipped
// without recursion, so a hostile frame costs at most its own length in
// work and nothing in allocations. The encoder of the test publisher
// (encode.go) is its inverse; the tests check both against an independent
// implementation (github.com/vmihailenco/msgpack/v5).

// errTruncated is a frame that ends inside a value, errMalformed one with
// a byte that starts no MessagePack value or a length beyond its end.
var (
	errTruncated = errors.New("msgpack: truncated")
	errMalformed = errors.New("msgpack: malformed")
)

// kind is the type of the next value.
type kind uint8

const (
	kindNil kind = iota
	kindBool
	kindInt   // signed
	kindUint  // unsigned (positive fixint included)
	kindFloat // float32 or float64
	kindStr
	kindBin
	kindArray
	kindMap
	kindExt
	kindBad
)

// reader reads MessagePack values from b. The first error sticks: every
// later read returns zero values and the same error.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) left() int { return len(r.b) - r.i }

// peek returns the kind of the next value without consuming it.
func (r *reader) peek() kind {
	if r.err != nil {
		return kindBad
	}
	if r.i >= len(r.b) {
		r.fail(errTruncated)
		return kindBad
	}
	return kindOf(r.b[r.i])
}

func kindOf(c byte) kind {
	switch {
	case c <= 0x7f || c >= 0xe0:
		if c <= 0x7f {
			return kindUint
		}
		return kindInt
	case c <= 0x8f:
		return kindMap
	case c <= 0x9f:
		return kindArray
	case c <= 0xbf:
		return kindStr
	}
	switch c {
	case 0xc0:
		return kindNil
	case 0xc2, 0xc3:
		return kindBool
	case 0xc4, 0xc5, 0xc6:
		return kindBin
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return kindExt
	case 0xca, 0xcb:
		return kindFloat
	case 0xcc, 0xcd, 0xce, 0xcf:
		return kindUint
	case 0xd0, 0xd1, 0xd2, 0xd3:
		return kindInt
	case 0xd9, 0xda, 0xdb:
		return kindStr
	case 0xdc, 0xdd:
		return kindArray
	case 0xde, 0xdf:
		return kindMap
	}
	return kindBad // 0xc1 is never used
}

// take consumes n bytes and returns them, or nil with an error.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail(errTruncated)
		return nil
	}
	s := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return s
}

func (r *reader) byte1() byte {
	s := r.take(1)
	if s == nil {
		return 0
	}
	return s[0]
}

// uintN reads an n-byte big-endian unsigned integer (n is 1, 2, 4 or 8).
func (r *reader) uintN(n int) uint64 {
	s := r.take(n)
	switch {
	case s == nil:
		return 0
	case n == 1:
		return uint64(s[0])
	case n == 2:
		return uint64(binary.BigEndian.Uint16(s))
	case n == 4:
		return uint64(binary.BigEndian.Uint32(s))
	}
	return binary.BigEndian.Uint64(s)
}

// length reads a length stored in n bytes and checks that that many
// elements fit in what is left of the frame: per is the fewest bytes one
// element can take (1 for an array's element or a string's byte, 2 for a
// map's pair).
func (r *reader) length(n, per int) int {
	v := r.uintN(n)
	if r.err != nil {
		return 0
	}
	if v > uint64(r.left()/per) {
		r.fail(errMalformed)
		return 0
	}
	return int(v)
}

// nil consumes a nil and reports whether the next value was one.
func (r *reader) nil() bool {
	if r.peek() == kindNil {
		r.i++
		return true
	}
	return false
}

// arrayLen reads an array header; ok is false (and nothing is consumed)
// when the next value is not an array.
func (r *reader) arrayLen() (n int, ok bool) {
	if r.peek() != kindArray {
		return 0, false
	}
	c := r.byte1()
	switch {
	case c <= 0x9f:
		n = int(c & 0x0f)
		if n > r.left() {
			r.fail(errMalformed)
			return 0, false
		}
	case c == 0xdc:
		n = r.length(2, 1)
	default:
		n = r.length(4, 1)
	}
	return n, r.err == nil
}

// mapLen reads a map header, as arrayLen.
func (r *reader) mapLen() (n int, ok bool) {
	if r.peek() != kindMap {
		return 0, false
	}
	c := r.byte1()
	switch {
	case c <= 0x8f:
		n = int(c & 0x0f)
		if 2*n > r.left() {
			r.fail(errMalformed)
			return 0, false
		}
	case c == 0xde:
		n = r.length(2, 2)
	default:
		n = r.length(4, 2)
	}
	return n, r.err == nil
}

// bytes reads a string or a binary in place; ok is false (nothing
// consumed) for any other kind.
func (r *reader) bytes() (s []byte, ok bool) {
	k := r.peek()
	if k != kindStr && k != kindBin {
		return nil, false
	}
	c := r.byte1()
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xc4 || c == 0xd9:
		n = r.length(1, 1)
	case c == 0xc5 || c == 0xda:
		n = r.length(2, 1)
	default:
		n = r.length(4, 1)
	}
	s = r.take(n)
	return s, r.err == nil
}

// integer reads an integer as its 64 bits: v is the value for unsigned
// ones and the two's complement for signed ones (neg reports a negative
// value). ok is false (nothing consumed) when the next value is no
// integer.
func (r *reader) integer() (v uint64, neg bool, ok bool) {
	k := r.peek()
	if k != kindInt && k != kindUint {
		return 0, false, false
	}
	c := r.byte1()
	switch {
	case c <= 0x7f:
		return uint64(c), false, true
	case c >= 0xe0:
		return uint64(int64(int8(c))), true, true
	}
	switch c {
	case 0xcc:
		v = r.uintN(1)
	case 0xcd:
		v = r.uintN(2)
	case 0xce:
		v = r.uintN(4)
	case 0xcf:
		v = r.uintN(8)
	case 0xd0:
		v = uint64(int64(int8(r.uintN(1))))
	case 0xd1:
		v = uint64(int64(int16(r.uintN(2))))
	case 0xd2:
		v = uint64(int64(int32(r.uintN(4))))
	case 0xd3:
		v = r.uintN(8)
	}
	if r.err != nil {
		return 0, false, false
	}
	return v, k == kindInt && int64(v) < 0, true
}

// float reads a float or an integer as a float64.
func (r *reader) float() (float64, bool) {
	switch r.peek() {
	case kindFloat:
		if r.byte1() == 0xca {
			return float64(math.Float32frombits(uint32(r.uintN(4)))), r.err == nil
		}
		return math.Float64frombits(r.uintN(8)), r.err == nil
	case kindInt, kindUint:
		v, neg, ok := r.integer()
		if neg {
			return float64(int64(v)), ok
		}
		return float64(v), ok
	}
	return 0, false
}

// skip consumes one value of any kind, nested ones included, without
// recursion: every value takes at least one byte, so the loop ends within
// the frame.
func (r *reader) skip() {
	pending := 1
	for pending > 0 && r.err == nil {
		pending--
		c := r.peek()
		switch c {
		case kindArray:
			n, _ := r.arrayLen()
			pending += n
		case kindMap:
			n, _ := r.mapLen()
			pending += 2 * n
		case kindStr, kindBin:
			r.bytes()
		case kindInt, kindUint:
			r.integer()
		case kindFloat:
			r.float()
		case kindNil, kindBool:
			r.i++
		case kindExt:
			r.skipExt()
		default:
			r.fail(errMalformed)
		}
	}
}

func (r *reader) skipExt() {
	c := r.byte1()
	var n int
	switch c {
	case 0xd4:
		n = 1
	case 0xd5:
		n = 2
	case 0xd6:
		n = 4
	case 0xd7:
		n = 8
	case 0xd8:
		n = 16
	case 0xc7:
		n = r.length(1, 1)
	case 0xc8:
		n = r.length(2, 1)
	default:
		n = r.length(4, 1)
	}
	r.take(1 + n) // the type byte, then the data
}
