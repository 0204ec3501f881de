package httpengine

import "net"

// SetRefuse sets whether new connections are refused (see Listener) and
// /health answers 503. Connections already open are left alone.
func (s *Server) SetRefuse(on bool) { s.refuse.Store(on) }

// Listener wraps l so that, while SetRefuse(true) is in force, every
// connection it accepts is reset at once (closed with SO_LINGER 0), as a
// crashed server would do. Serve the Handler on it.
func (s *Server) Listener(l net.Listener) net.Listener { return refusingListener{l, s} }

type refusingListener struct {
	net.Listener
	s *Server
}

func (l refusingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.s.refuse.Load() {
			return c, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}
