package openai

import (
	"bytes"
	"slices"
	"strings"
)

// canon reads one value and appends its canonical JSON to dst: no
// whitespace, object keys sorted bytewise with only the last of duplicate
// keys kept (as Python's json module keeps it), strings re-escaped minimally
// (only '"', '\\' and control characters; everything else as UTF-8), numbers
// and literals as written. Two documents that differ only in formatting, key
// order or string escaping have the same canonical form.
//
// Objects can only be written once all their keys are known, so containers
// are first read into a tree whose leaves point into the input, then
// written out in one walk: the time is linear in the input however deep the
// nesting, where writing each level to its own buffer would copy the
// innermost values once per enclosing object.
func (r *reader) canon(dst []byte) ([]byte, error) {
	switch r.peek() {
	case '{', '[':
		var t canonTree
		root, err := t.read(r, nil)
		if err != nil {
			return nil, err
		}
		return t.write(dst, r.data, root), nil
	default:
		start := r.pos
		if err := r.skip(); err != nil {
			return nil, err
		}
		return appendScalar(dst, r.data[start:r.pos]), nil
	}
}

// canonTree is a JSON container read for canon: one small node per value,
// with scalars left in the input and written from there. Member keys are
// decoded into keys, back to back. Offsets are int32: Parse refuses bodies
// of 2 GiB or more.
type canonTree struct {
	nodes []canonNode
	keys  []byte
}

type canonNode struct {
	keyOff, keyLen int32 // the member key in keys, for a member of an object
	start, end     int32 // the value's text in the input
	first, next    int32 // first child and next sibling; -1 for none
	kind           byte  // '{', '[', or 0 for a scalar
}

// read reads the value at r into the tree as a node whose key is key, and
// returns its index.
func (t *canonTree) read(r *reader, key []byte) (int32, error) {
	i := int32(len(t.nodes))
	t.nodes = append(t.nodes, canonNode{keyOff: int32(len(t.keys)), keyLen: int32(len(key)), first: -1, next: -1})
	t.keys = append(t.keys, key...)
	c := r.peek()
	if c != '{' && c != '[' {
		t.nodes[i].start = int32(r.pos)
		if err := r.skip(); err != nil {
			return 0, err
		}
		t.nodes[i].end = int32(r.pos)
		return i, nil
	}
	t.nodes[i].kind = c
	if err := r.open(); err != nil {
		return 0, err
	}
	last := int32(-1)
	for first := true; ; first = false {
		var (
			k   int32
			ok  bool
			err error
		)
		if c == '{' {
			var kb []byte
			if kb, ok, err = r.nextKey(first); ok && err == nil {
				k, err = t.read(r, kb)
			}
		} else if ok, err = r.nextElem(first); ok && err == nil {
			k, err = t.read(r, nil)
		}
		if err != nil {
			return 0, err
		}
		if !ok {
			return i, nil
		}
		if last < 0 {
			t.nodes[i].first = k
		} else {
			t.nodes[last].next = k
		}
		last = k
	}
}

func (t *canonTree) key(i int32) []byte {
	n := &t.nodes[i]
	return t.keys[n.keyOff : n.keyOff+n.keyLen]
}

// write appends node i in canonical form to dst; data is the input.
func (t *canonTree) write(dst, data []byte, i int32) []byte {
	n := t.nodes[i]
	switch n.kind {
	case '[':
		dst = append(dst, '[')
		for k := n.first; k >= 0; k = t.nodes[k].next {
			if k != n.first {
				dst = append(dst, ',')
			}
			dst = t.write(dst, data, k)
		}
		return append(dst, ']')
	case '{':
		var kids []int32
		for k := n.first; k >= 0; k = t.nodes[k].next {
			kids = append(kids, k)
		}
		slices.SortStableFunc(kids, func(a, b int32) int { return bytes.Compare(t.key(a), t.key(b)) })
		dst = append(dst, '{')
		written := 0
		for j, k := range kids {
			if j+1 < len(kids) && bytes.Equal(t.key(kids[j+1]), t.key(k)) {
				continue // a later duplicate wins
			}
			if written > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, t.key(k))
			dst = append(dst, ':')
			dst = t.write(dst, data, k)
			written++
		}
		return append(dst, '}')
	default:
		return appendScalar(dst, data[n.start:n.end])
	}
}

// appendScalar appends the canonical form of a valid scalar's text: a
// string re-escaped if it has escapes, anything else as it is. A string
// without a backslash is already canonical, since a valid one cannot hold
// '"' or control characters unescaped.
func appendScalar(dst, raw []byte) []byte {
	if len(raw) == 0 || raw[0] != '"' || bytes.IndexByte(raw, '\\') < 0 {
		return append(dst, raw...)
	}
	sr := reader{data: raw}
	s, err := sr.readString(nil, strView)
	if err != nil { // cannot happen: raw was validated when read
		return append(dst, raw...)
	}
	return appendQuoted(dst, s)
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
