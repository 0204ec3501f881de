package openai

import (
	"strconv"
	"strings"
)

// param is one step of the path to a field, such as the "content" in
// messages[2].content. Paths are chains of params on the stack, linked
// through parent, and are only rendered to text when an error needs them, so
// the success path does not build strings it will throw away.
type param struct {
	parent *param
	name   string // field name; unused for an index step
	index  int    // array index, for an index step
	isElem bool   // an index step: [index]
}

// field returns the path to field name of the value at p (p may be nil for
// a top-level field).
func field(p *param, name string) param { return param{parent: p, name: name} }

// elem returns the path to element i of the array at p.
func elem(p *param, i int) param { return param{parent: p, index: i, isElem: true} }

// String renders the path as OpenAI does: messages[2].content. It keeps no
// reference to p, so that paths can stay on the stack.
func (p *param) String() string {
	n := 0
	for q := p; q != nil; q = q.parent {
		n++
	}
	var b strings.Builder
	for k := n - 1; k >= 0; k-- { // the step k links above p, root first
		q := p
		for range k {
			q = q.parent
		}
		if q.isElem {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(q.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(q.name)
	}
	return b.String()
}
