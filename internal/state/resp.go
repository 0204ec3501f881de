package state

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// go-redis v9 trusts the lengths a server announces: "$<n>" makes it
// allocate n bytes, "*<n>" an n-element slice, before reading any of them,
// and it has no option to bound either. A hostile or corrupted Redis could
// make every replica allocate gigabytes (or panic in makeslice) with one
// header. guardConn sits under go-redis, in the client's Dialer, and parses
// the RESP2/RESP3 stream as it is read: a header announcing more than the
// limits fails the read and closes the connection before go-redis sees any
// of that chunk. The client then treats it as a connection failure (an
// outage: routing goes on with the local view).

// errReplyTooLarge marks a reply refused by the guard.
var errReplyTooLarge = errors.New("state: redis reply refused")

// respScanner follows a RESP byte stream, one chunk at a time, keeping only
// a few integers: where it is in the current header or bulk payload and how
// many values the open aggregates still announce.
type respScanner struct {
	maxBulk  int64 // largest bulk payload (and simple line) accepted
	maxElems int64 // largest number of announced values outstanding
	maxTotal int64 // largest sum of bulk payloads in one top-level reply

	state   respState
	kind    byte  // type byte of the header or line being read
	n       int64 // the header's number so far, or payload bytes left
	neg     bool  // the header's number started with '-'
	digits  bool  // the header's number has at least one digit
	line    int64 // bytes of the simple line read so far
	pending int64 // values announced by aggregates and not yet begun
	total   int64 // bulk payload bytes of the current top-level reply
}

type respState uint8

const (
	respType   respState = iota // expecting a type byte
	respHeader                  // reading a length or count, up to '\n'
	respLine                    // reading a simple line, up to '\n'
	respBody                    // skipping a bulk payload and its CRLF
)

// scan advances over p. It returns an error, and the scanner must not be
// used again, at the first byte that is not RESP or at a header beyond the
// limits.
func (r *respScanner) scan(p []byte) error {
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch r.state {
		case respType:
			switch b {
			case '+', '-', ':', ',', '(', '#', '_':
				r.state, r.line = respLine, 0
			case '$', '=', '!', '*', '%', '~', '>', '|':
				r.state, r.n, r.neg, r.digits = respHeader, 0, false, false
			default:
				return fmt.Errorf("%w: type byte %q is not RESP", errReplyTooLarge, b)
			}
			switch {
			case r.pending == 0: // a new top-level reply
				r.total = 0
			case b != '|': // an attribute precedes a value, it is not one
				r.pending--
			}
			r.kind = b
		case respLine:
			if b == '\n' {
				r.state = respType
				continue
			}
			if r.line++; r.line > r.maxBulk {
				return fmt.Errorf("%w: line longer than %d bytes", errReplyTooLarge, r.maxBulk)
			}
		case respHeader:
			if err := r.header(b); err != nil {
				return err
			}
		case respBody:
			k := min(r.n, int64(len(p)-i))
			r.n -= k
			i += int(k) - 1
			if r.n == 0 {
				r.state = respType
			}
		}
	}
	return nil
}

// header consumes one byte of a length or count header.
func (r *respScanner) header(b byte) error {
	bulk := r.kind == '$' || r.kind == '=' || r.kind == '!'
	switch {
	case b >= '0' && b <= '9':
		r.n = r.n*10 + int64(b-'0')
		r.digits = true
		limit := r.maxElems
		if bulk {
			limit = r.maxBulk
		}
		if r.n > limit && !(r.neg && r.n == 1) {
			return fmt.Errorf("%w: %q header above %d", errReplyTooLarge, r.kind, limit)
		}
	case b == '-' && !r.neg && !r.digits:
		r.neg = true
	case b == '\r':
	case b == '\n':
		return r.endHeader(bulk)
	default:
		return fmt.Errorf("%w: byte %q in a %q header", errReplyTooLarge, b, r.kind)
	}
	return nil
}

func (r *respScanner) endHeader(bulk bool) error {
	switch {
	case !r.digits || r.neg && r.n != 1:
		return fmt.Errorf("%w: malformed %q header", errReplyTooLarge, r.kind)
	case r.neg: // null bulk or aggregate
		r.state = respType
	case bulk:
		if r.total += r.n; r.total > r.maxTotal {
			return fmt.Errorf("%w: more than %d bytes in one reply", errReplyTooLarge, r.maxTotal)
		}
		r.state, r.n = respBody, r.n+2
	default:
		add := r.n
		if r.kind == '%' || r.kind == '|' {
			add *= 2
		}
		if r.pending+add > r.maxElems {
			return fmt.Errorf("%w: more than %d values outstanding", errReplyTooLarge, r.maxElems)
		}
		r.pending += add
		r.state = respType
	}
	return nil
}

// guardConn is a connection whose reads are checked by a respScanner. The
// first refused read closes it; every later read fails.
type guardConn struct {
	net.Conn
	refused func(error) // called once, on the refused read

	mu  sync.Mutex // guards sc and err (go-redis reads from one goroutine; this is for safety)
	sc  respScanner
	err error
}

func newGuardConn(c net.Conn, limits respScanner, refused func(error)) *guardConn {
	return &guardConn{Conn: c, refused: refused, sc: limits}
}

// Read reads from the connection and checks what it read before returning
// it.
func (g *guardConn) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if serr := g.sc.scan(p[:n]); serr != nil {
			clear(p[:n])
			g.err = serr
			_ = g.Conn.Close()
			if g.refused != nil {
				g.refused(serr)
			}
			return 0, serr
		}
	}
	return n, err
}

// replyGuard is the client's Dialer: it dials as go-redis would (TCP, with
// TLS when configured) and puts a guardConn with the reply limits on top.
type replyGuard struct {
	opt     RedisOptions
	log     *slog.Logger
	refused atomic.Uint64 // connections closed for a reply beyond the limits
}

func (g *replyGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: opTimeout, KeepAlive: 30 * time.Second}
	var (
		c   net.Conn
		err error
	)
	if g.opt.TLS != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: g.opt.TLS}).DialContext(ctx, network, addr)
	} else {
		c, err = d.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	limits := respScanner{maxBulk: g.opt.MaxReplyBytes, maxElems: g.opt.MaxReplyElements, maxTotal: g.opt.MaxReplyTotal}
	return newGuardConn(c, limits, func(err error) {
		g.refused.Add(1)
		g.log.Warn("state: closed a redis connection whose reply was beyond the limits", "addr", addr, "err", err)
	}), nil
}
