package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// zmq4 allocates whatever length a peer's frame header claims and
// accepts any number of frames in a message. The publisher's zmq4 sockets
// (publisher.go; the subscriber speaks ZMTP itself, zmtp.go) therefore run
// over a TCP transport of their own ("kvtcp") whose
// connections watch the inbound ZMTP 3 stream as it is read (the 64-byte
// greeting, then frames: a flags byte, a 1- or 8-byte length, the body)
// and fail the read, closing the connection, at a message of more than
// maxWireMessage bytes or maxWireFrames frames, before zmq4 sees the
// header that would make it allocate.
const (
	scheme         = "kvtcp"
	maxWireMessage = MaxFrame + maxTopic + 64
	maxWireFrames  = 8
	greetingLen    = 64
)

// errWire is an inbound stream beyond the bounds.
var errWire = errors.New("kvevents: zmtp frame beyond bounds")

var registerOnce sync.Once

func registerTransport() {
	registerOnce.Do(func() {
		if err := zmq4.RegisterTransport(scheme, boundedTCP{}); err != nil {
			panic(err) // only a second registration under this name, which Once prevents
		}
	})
}

// endpoint turns a tcp:// endpoint into this package's bounded transport.
func endpoint(ep string) (string, error) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", fmt.Errorf("kvevents: endpoint %q: only tcp:// is supported", ep)
	}
	return scheme + "://" + rest, nil
}

type boundedTCP struct{}

func (boundedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c}, nil
}

func (boundedTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return boundedListener{l}, nil
}

func (boundedTCP) Addr(ep string) (string, error) {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return "", err
	}
	if port == "*" || port == "" {
		port = "0"
	}
	if host == "*" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, port), nil
}

type boundedListener struct{ net.Listener }

func (l boundedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c}, nil
}

// boundedConn parses the inbound ZMTP stream as it passes.
type boundedConn struct {
	net.Conn
	greeting int  // greeting bytes still to pass
	started  bool // the greeting's length is set
	hdr      [9]byte
	nhdr     int    // header bytes seen of the current frame
	body     uint64 // body bytes still to pass
	frames   int    // frames of the current message so far
	bytes    uint64 // their bytes
	err      error
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if werr := c.watch(p[:n]); werr != nil {
		c.err = werr
		c.Conn.Close()
		return 0, werr
	}
	return n, err
}

// watch advances the parser over b.
func (c *boundedConn) watch(b []byte) error {
	if !c.started {
		c.started, c.greeting = true, greetingLen
	}
	for len(b) > 0 {
		if c.greeting > 0 {
			k := min(c.greeting, len(b))
			c.greeting -= k
			b = b[k:]
			continue
		}
		if c.body > 0 {
			k := min(c.body, uint64(len(b)))
			c.body -= k
			b = b[k:]
			continue
		}
		c.hdr[c.nhdr] = b[0]
		c.nhdr++
		b = b[1:]
		flags := c.hdr[0]
		need := 2
		if flags&0x02 != 0 {
			need = 9
		}
		if c.nhdr < need {
			continue
		}
		var size uint64
		if need == 2 {
			size = uint64(c.hdr[1])
		} else {
			size = binary.BigEndian.Uint64(c.hdr[1:9])
		}
		c.nhdr = 0
		if size > maxWireMessage {
			return fmt.Errorf("%w: frame of %d bytes", errWire, size)
		}
		if flags&0x04 == 0 { // a message frame
			c.frames++
			c.bytes += size
			switch {
			case c.frames > maxWireFrames:
				return fmt.Errorf("%w: more than %d frames in a message", errWire, maxWireFrames)
			case c.bytes > maxWireMessage:
				return fmt.Errorf("%w: message of more than %d bytes", errWire, maxWireMessage)
			}
			if flags&0x01 == 0 {
				c.frames, c.bytes = 0, 0
			}
		}
		c.body = size
	}
	return nil
}
