package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

const (
	testMaxBulk  = 1 << 10
	testMaxElems = 64
)

func newTestScanner() *respScanner {
	return &respScanner{maxBulk: testMaxBulk, maxElems: testMaxElems, maxTotal: 4 * testMaxBulk}
}

// scanChunks scans data cut at the given offsets (out of range ones are
// ignored) and returns the first error.
func scanChunks(r *respScanner, data []byte, cuts ...int) error {
	prev := 0
	for _, c := range cuts {
		if c <= prev || c >= len(data) {
			continue
		}
		if err := r.scan(data[prev:c]); err != nil {
			return err
		}
		prev = c
	}
	return r.scan(data[prev:])
}

func TestRespScanner(t *testing.T) {
	big := strings.Repeat("x", testMaxBulk)
	tests := []struct {
		name  string
		in    string
		valid bool
	}{
		{"simple string", "+OK\r\n", true},
		{"error", "-ERR wrong\r\n", true},
		{"integer", ":-42\r\n", true},
		{"bulk", "$5\r\nhello\r\n", true},
		{"empty bulk", "$0\r\n\r\n", true},
		{"null bulk", "$-1\r\n", true},
		{"null array", "*-1\r\n", true},
		{"bulk at the limit", fmt.Sprintf("$%d\r\n%s\r\n", testMaxBulk, big), true},
		{"bulk with CRLF inside", "$4\r\n\r\n\r\n\r\n", true},
		{"nested arrays", "*2\r\n*2\r\n:1\r\n$1\r\na\r\n*0\r\n", true},
		{"xread shape", "*1\r\n*2\r\n$3\r\nkey\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*4\r\n$1\r\nr\r\n$1\r\nb\r\n$1\r\nd\r\n$2\r\n\x00\x01\r\n", true},
		{"resp3 map, set, double, bool, null, bignum", "%2\r\n+a\r\n:1\r\n+b\r\n~2\r\n,1.5\r\n#t\r\n_\r\n(123\r\n", true},
		{"resp3 verbatim and blob error", "=8\r\ntxt:abcd\r\n!3\r\nERR\r\n", true},
		{"attribute then value", "|1\r\n+ttl\r\n:3\r\n+OK\r\n", true},
		{"push", ">2\r\n+message\r\n+x\r\n", true},
		{"several replies", "+OK\r\n:1\r\n$1\r\nz\r\n", true},
		{"array at the limit", "*64\r\n" + strings.Repeat(":1\r\n", 64), true},
		{"total at the limit", "*4\r\n" + strings.Repeat(fmt.Sprintf("$%d\r\n%s\r\n", testMaxBulk, big), 4), true},
		{"replies each within the total", strings.Repeat("*2\r\n"+strings.Repeat(fmt.Sprintf("$%d\r\n%s\r\n", testMaxBulk, big), 2), 5), true},

		{"total above the limit", "*5\r\n" + strings.Repeat(fmt.Sprintf("$%d\r\n%s\r\n", testMaxBulk, big), 5), false},
		{"bulk of 2^63", "$9223372036854775807\r\n", false},
		{"bulk above 2^63", "$99999999999999999999999\r\n", false},
		{"bulk one above the limit", fmt.Sprintf("$%d\r\n", testMaxBulk+1), false},
		{"verbatim too large", "=1000000\r\n", false},
		{"blob error too large", "!1000000\r\n", false},
		{"array of 2^62", "*4611686018427387904\r\n", false},
		{"array above the limit", "*65\r\n", false},
		{"map counts twice", "%33\r\n", false},
		{"set too large", "~100\r\n", false},
		{"push too large", ">100\r\n", false},
		{"nesting past the limit", strings.Repeat("*40\r\n", 3), false},
		{"negative length", "$-2\r\n", false},
		{"minus zero", "$-0\r\n", false},
		{"empty length", "$\r\n", false},
		{"streamed string", "$?\r\n", false},
		{"letters in length", "*1x\r\n", false},
		{"garbage type byte", "hello\r\n", false},
		{"garbage after a reply", "+OK\r\n\x00", false},
		{"endless simple line", "+" + strings.Repeat("a", testMaxBulk+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.in)
			err := newTestScanner().scan(data)
			if (err == nil) != tt.valid {
				t.Fatalf("scan(%.40q) = %v, want valid %v", tt.in, err, tt.valid)
			}
			if err != nil && !errors.Is(err, errReplyTooLarge) {
				t.Errorf("scan() = %v, want errReplyTooLarge", err)
			}
			for cut := 1; cut < len(data) && cut < 64; cut++ {
				if err := scanChunks(newTestScanner(), data, cut); (err == nil) != tt.valid {
					t.Fatalf("scan cut at %d = %v, want valid %v", cut, err, tt.valid)
				}
			}
			bytewise := newTestScanner()
			var berr error
			for i := range data {
				if berr = bytewise.scan(data[i : i+1]); berr != nil {
					break
				}
			}
			if (berr == nil) != tt.valid {
				t.Fatalf("scan byte by byte = %v, want valid %v", berr, tt.valid)
			}
		})
	}
}

// scriptConn is a net.Conn whose reads return chunks in turn.
type scriptConn struct {
	net.Conn // nil: only Read and Close are used
	chunks   [][]byte
	closed   bool
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *scriptConn) Close() error { c.closed = true; return nil }

func TestGuardConnRefusesBeforeReturning(t *testing.T) {
	// A valid reply, then a hostile header in the same chunk: none of the
	// chunk reaches the reader, the connection is closed, and later reads
	// fail too.
	sc := &scriptConn{chunks: [][]byte{[]byte("+OK\r\n"), []byte(":1\r\n$9223372036854775807\r\n")}}
	var refused []error
	g := newGuardConn(sc, *newTestScanner(), func(err error) { refused = append(refused, err) })
	buf := make([]byte, 64)
	n, err := g.Read(buf)
	if err != nil || string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("Read() = %q, %v, want +OK", buf[:n], err)
	}
	n, err = g.Read(buf)
	if n != 0 || !errors.Is(err, errReplyTooLarge) {
		t.Fatalf("Read() = %d, %v, want 0, errReplyTooLarge", n, err)
	}
	if bytes.Contains(buf, []byte("922")) {
		t.Errorf("refused bytes left in the caller's buffer: %q", buf)
	}
	if !sc.closed || len(refused) != 1 {
		t.Errorf("closed = %v, refused %d times, want closed once", sc.closed, len(refused))
	}
	if _, err := g.Read(buf); !errors.Is(err, errReplyTooLarge) {
		t.Errorf("Read() after refusal = %v, want errReplyTooLarge", err)
	}
}

// genValue appends a RESP value drawn from src (consumed as it goes) to
// dst: every type the scanner knows, nested up to depth.
func genValue(dst []byte, src *[]byte, depth int) []byte {
	next := func() byte {
		if len(*src) == 0 {
			return 0
		}
		b := (*src)[0]
		*src = (*src)[1:]
		return b
	}
	kind := next() % 14
	if depth == 0 {
		kind %= 8
	}
	switch kind {
	case 0:
		return fmt.Appendf(dst, "+s%d\r\n", next())
	case 1:
		return fmt.Appendf(dst, "-ERR %d\r\n", next())
	case 2:
		return fmt.Appendf(dst, ":%d\r\n", -int(next()))
	case 3, 4:
		n := int(next()) * 3
		dst = fmt.Appendf(dst, "$%d\r\n", n)
		for i := range n {
			dst = append(dst, "\r\n$*x"[i%5])
		}
		return append(dst, "\r\n"...)
	case 5:
		return append(dst, "$-1\r\n"...)
	case 6:
		return append(dst, "_\r\n,3.25\r\n#f\r\n"...)
	case 7:
		payload := "txt:" + strings.Repeat("v", int(next()%5))
		return fmt.Appendf(dst, "=%d\r\n%s\r\n", len(payload), payload)
	}
	n := int(next() % 5)
	head := "*~>%|"[int(kind-8)%5]
	dst = fmt.Appendf(dst, "%c%d\r\n", head, n)
	m := n
	if head == '%' || head == '|' {
		m *= 2
	}
	for range m {
		dst = genValue(dst, src, depth-1)
	}
	if head == '|' { // an attribute is followed by the value it annotates
		dst = genValue(dst, src, depth-1)
	}
	return dst
}

// FuzzRespScanner checks that the scanner never panics, that where the
// stream is cut between reads never changes its verdict, and that every
// valid reply within the limits passes, whatever the cuts.
func FuzzRespScanner(f *testing.F) {
	f.Add([]byte("+OK\r\n"), []byte{3, 7})
	f.Add([]byte("$9223372036854775807\r\n"), []byte{1})
	f.Add([]byte("*2\r\n$1\r\na\r\n%1\r\n+k\r\n:1\r\n"), []byte{5, 9, 2})
	f.Add([]byte{8, 3, 3, 2, 10, 12, 4, 1, 13, 2, 0, 7, 1}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, data, cutsRaw []byte) {
		cuts := make([]int, 0, len(cutsRaw))
		at := 0
		for _, c := range cutsRaw {
			at += int(c)
			cuts = append(cuts, at)
		}
		// Arbitrary bytes: the same verdict whole and cut.
		whole := newTestScanner().scan(data)
		cut := scanChunks(newTestScanner(), data, cuts...)
		if (whole == nil) != (cut == nil) {
			t.Fatalf("scan(%q) = %v whole, %v cut at %v", data, whole, cut, cuts)
		}
		// A valid reply drawn from data: passes, whole and cut.
		src := data
		var reply []byte
		for len(src) > 0 && len(reply) < 4*testMaxBulk {
			reply = genValue(reply, &src, 3)
		}
		limits := &respScanner{maxBulk: 1 << 20, maxElems: 1 << 20, maxTotal: 1 << 30}
		if err := scanChunks(limits, reply, cuts...); err != nil {
			t.Fatalf("valid reply %q refused (cuts %v): %v", reply, cuts, err)
		}
		if limits.state != respType || limits.pending != 0 {
			t.Fatalf("after a whole reply: state %d, %d values pending, want a fresh start", limits.state, limits.pending)
		}
	})
}
