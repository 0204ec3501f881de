package httpengine

import (
	"fmt"
	"net"
	"sync"
)

// SetRefuse sets whether new connections are refused (see Listener) and
// /health answers 503. Connections already open are left alone.
func (s *Server) SetRefuse(on bool) { s.refuse.Store(on) }

// Listener wraps l so that the connection faults act on it; serve the
// Handler on it. While SetRefuse(true) is in force, every connection it
// accepts is reset at once (closed with SO_LINGER 0), as a crashed server
// would do. While Faults.RefuseInference is on, l's socket is closed, so
// that connecting fails (connection refused), and opened again on the same
// address when the fault is lifted.
func (s *Server) Listener(l net.Listener) net.Listener {
	pl := &listener{s: s, addr: l.Addr(), inner: l}
	pl.cond = sync.NewCond(&pl.mu)
	s.lmu.Lock()
	s.listeners = append(s.listeners, pl)
	pause := s.Faults().RefuseInference
	s.lmu.Unlock()
	if pause {
		pl.pause()
	}
	return pl
}

// listener is what Listener returns.
type listener struct {
	s    *Server
	addr net.Addr

	mu     sync.Mutex // guards inner, paused and closed; cond waits on it
	cond   *sync.Cond
	inner  net.Listener // nil while paused
	paused bool
	closed bool
}

func (l *listener) Addr() net.Addr { return l.addr }

// Accept waits for a connection, through any pause, and returns it tracked
// by the server's connection set.
func (l *listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		for l.paused && !l.closed {
			l.cond.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		inner := l.inner
		l.mu.Unlock()

		c, err := inner.Accept()
		if err != nil {
			l.mu.Lock()
			// Closed by pause (or paused and resumed since): wait for the
			// socket of the next resume.
			again := !l.closed && l.inner != inner
			l.mu.Unlock()
			if again {
				continue
			}
			return nil, err
		}
		if l.s.refuse.Load() {
			reset(c)
			continue
		}
		return l.s.conns.add(c), nil
	}
}

// Close closes the socket; Accept then returns net.ErrClosed.
func (l *listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.cond.Broadcast()
	if l.inner == nil {
		return nil
	}
	return l.inner.Close()
}

// pause closes the socket; Accept waits for resume.
func (l *listener) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paused || l.closed {
		return
	}
	l.paused = true
	l.inner.Close()
	l.inner = nil
}

// resume listens again on the same address.
func (l *listener) resume() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused || l.closed {
		return nil
	}
	nl, err := net.Listen(l.addr.Network(), l.addr.String())
	if err != nil {
		return fmt.Errorf("httpengine: listen again on %s: %w", l.addr, err)
	}
	l.inner = nl
	l.paused = false
	l.cond.Broadcast()
	return nil
}

// connSet holds the open connections accepted through Listener, by remote
// address (what a handler knows of its connection, as
// http.Request.RemoteAddr), and which of them carried inference requests.
type connSet struct {
	mu sync.Mutex       // guards m
	m  map[string]*conn // remote address -> connection
}

// conn is an accepted connection that leaves the set when closed.
type conn struct {
	net.Conn
	set       *connSet
	key       string
	inference bool // guarded by set.mu
}

func (c *conn) Close() error {
	c.set.mu.Lock()
	if c.set.m[c.key] == c {
		delete(c.set.m, c.key)
	}
	c.set.mu.Unlock()
	return c.Conn.Close()
}

func (cs *connSet) add(nc net.Conn) *conn {
	c := &conn{Conn: nc, set: cs, key: nc.RemoteAddr().String()}
	cs.mu.Lock()
	if cs.m == nil {
		cs.m = make(map[string]*conn)
	}
	cs.m[c.key] = c
	cs.mu.Unlock()
	return c
}

// markInference records that the connection from remote carried an
// inference request.
func (cs *connSet) markInference(remote string) {
	cs.mu.Lock()
	if c := cs.m[remote]; c != nil {
		c.inference = true
	}
	cs.mu.Unlock()
}

// reset resets the connection from remote, if it is in the set.
func (cs *connSet) reset(remote string) {
	cs.mu.Lock()
	c := cs.m[remote]
	cs.mu.Unlock()
	if c != nil {
		reset(c)
	}
}

// resetInference resets every open connection that carried an inference
// request, requests in flight on them included.
func (cs *connSet) resetInference() {
	cs.mu.Lock()
	var victims []*conn
	for _, c := range cs.m {
		if c.inference {
			victims = append(victims, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range victims {
		reset(c)
	}
}

// reset closes c with SO_LINGER 0: the peer gets a TCP reset, as from a
// crashed server, rather than an orderly close.
func reset(c net.Conn) {
	raw := c
	if w, ok := c.(*conn); ok {
		raw = w.Conn
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
