package openai

import (
	"slices"
	"strconv"
	"strings"
)

// canon reads one value and appends its canonical JSON to dst: no
// whitespace, object keys sorted bytewise with only the last of duplicate
// keys kept (as Python's json module keeps it), strings re-escaped minimally
// (only '"', '\\' and control characters; everything else as UTF-8), numbers
// and literals as written. Two documents that differ only in formatting, key
// order or string escaping have the same canonical form.
func (r *reader) canon(dst []byte) ([]byte, error) {
	switch c := r.peek(); c {
	case '{':
		if err := r.open(); err != nil {
			return nil, err
		}
		var ms []member
		for first := true; ; first = false {
			key, ok, err := r.nextKey(first)
			if err != nil {
				return nil, err
			}
			if !ok {
				return appendObject(dst, ms), nil
			}
			m := member{key: string(key)}
			if m.val, err = r.canon(nil); err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	case '[':
		if err := r.open(); err != nil {
			return nil, err
		}
		dst = append(dst, '[')
		for first := true; ; first = false {
			ok, err := r.nextElem(first)
			if err != nil {
				return nil, err
			}
			if !ok {
				return append(dst, ']'), nil
			}
			if !first {
				dst = append(dst, ',')
			}
			if dst, err = r.canon(dst); err != nil {
				return nil, err
			}
		}
	case '"':
		s, err := r.readString(nil, strView)
		if err != nil {
			return nil, err
		}
		return appendQuoted(dst, s), nil
	case 't', 'f', 'n':
		start := r.pos
		if err := r.skip(); err != nil {
			return nil, err
		}
		return append(dst, r.data[start:r.pos]...), nil
	default:
		text, err := r.readNumber()
		if err != nil {
			return nil, err
		}
		return append(dst, text...), nil
	}
}

// member is an object member in canonical form.
type member struct {
	key string
	val []byte // canonical JSON
}

// appendObject appends the canonical object with members ms (in document
// order) to dst. It sorts ms.
func appendObject(dst []byte, ms []member) []byte {
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	n := 0
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].key == m.key {
			continue // a later duplicate wins
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendQuoted(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.val...)
		n++
	}
	return append(dst, '}')
}

// appendQuoted appends s as a JSON string with minimal escaping.
func appendQuoted[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	for len(s) > 0 {
		n := plainRunOf(s)
		dst = append(dst, s[:n]...)
		if n == len(s) {
			break
		}
		switch c := s[n]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigit(c>>4), hexDigit(c&0xf))
		}
		s = s[n+1:]
	}
	return append(dst, '"')
}

// plainRunOf is plainRun for strings or byte slices.
func plainRunOf[S ~string | ~[]byte](s S) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}

func hexDigit(c byte) byte { return "0123456789abcdef"[c] }

// fnv1a returns the 64-bit FNV-1a hash of b.
func fnv1a(b []byte) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

// marker is the text that stands for a non-text content part of type typ
// whose canonical JSON is part: <typ:hash> with the hash in 16 hex digits.
func marker(typ string, part []byte) string {
	h := strconv.FormatUint(fnv1a(part), 16)
	return "<" + typ + ":" + strings.Repeat("0", 16-len(h)) + h + ">"
}
