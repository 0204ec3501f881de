package kvevents

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The subscriber's side of ZeroMQ, written for this package: ZMTP 3 (RFC
// 23/ZMTP, rfc.zeromq.org) with the NULL mechanism, as SUB (live events)
// and DEALER (replay), over TCP. It is all the router needs of ZeroMQ, and
// owning it keeps the three promises a general library did not: every
// frame's length is checked against the bounds before its body is
// allocated, a connection is one goroutine's and ends with its context
// (no reader left blocked on a queue nobody drains), and nothing is
// buffered beyond the message being read. Publishers (engines, and this
// package's test publisher over go-zeromq/zmq4) are unchanged: the wire is
// the standard one.

const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// errZMTP is a peer that does not speak ZMTP 3 as expected.
var errZMTP = errors.New("kvevents: zmtp")

// zconn is one ZMTP connection after its handshake.
type zconn struct {
	c    net.Conn
	r    *bufio.Reader
	stop func() bool // releases the close-on-ctx hook
}

// tcpAddr returns the host:port of a tcp:// endpoint.
func tcpAddr(ep string) (string, error) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", fmt.Errorf("kvevents: endpoint %q: only tcp:// is supported", ep)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("kvevents: endpoint %q: %w", ep, err)
	}
	if host == "*" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, port), nil
}

// dialZMTP connects to a tcp:// endpoint as socket type typ ("SUB",
// "DEALER") and completes the handshake within timeout. The connection
// is closed when ctx ends.
func dialZMTP(ctx context.Context, ep, typ string, timeout time.Duration) (*zconn, error) {
	addr, err := tcpAddr(ep)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	z, err := handshake(ctx, c, typ, timeout)
	if err != nil {
		c.Close()
		return nil, err
	}
	return z, nil
}

// handshake runs the greeting and READY exchange on c as socket type typ,
// then closes c when ctx ends.
func handshake(ctx context.Context, c net.Conn, typ string, timeout time.Duration) (*zconn, error) {
	c.SetDeadline(time.Now().Add(timeout))
	var g [64]byte
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:], "NULL")
	if _, err := c.Write(g[:]); err != nil {
		return nil, err
	}
	z := &zconn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	var peer [64]byte
	if _, err := io.ReadFull(z.r, peer[:]); err != nil {
		return nil, err
	}
	if peer[0] != 0xff || peer[9] != 0x7f || peer[10] < 3 {
		return nil, fmt.Errorf("%w: not a ZMTP 3 peer", errZMTP)
	}
	if mech := string(bytes.TrimRight(peer[12:32], "\x00")); mech != "NULL" {
		return nil, fmt.Errorf("%w: mechanism %q, want NULL", errZMTP, mech)
	}
	ready := []byte("\x05READY")
	ready = appendProp(ready, "Socket-Type", typ)
	if typ == "DEALER" {
		ready = appendProp(ready, "Identity", "")
	}
	if err := z.writeFrame(flagCommand, ready); err != nil {
		return nil, err
	}
	flags, body, err := z.readFrame(maxTopic + 1024)
	if err != nil {
		return nil, err
	}
	if flags&flagCommand == 0 || !bytes.HasPrefix(body, []byte("\x05READY")) {
		return nil, fmt.Errorf("%w: the peer's first frame is no READY", errZMTP)
	}
	c.SetDeadline(time.Time{})
	z.stop = context.AfterFunc(ctx, func() { c.Close() })
	return z, nil
}

func appendProp(dst []byte, name, value string) []byte {
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

func (z *zconn) writeFrame(flags byte, body []byte) error {
	var hdr [9]byte
	n := 2
	hdr[0] = flags
	if len(body) > 255 {
		hdr[0] |= flagLong
		binary.BigEndian.PutUint64(hdr[1:], uint64(len(body)))
		n = 9
	} else {
		hdr[1] = byte(len(body))
	}
	if _, err := z.c.Write(hdr[:n]); err != nil {
		return err
	}
	_, err := z.c.Write(body)
	return err
}

// send writes one message of frames.
func (z *zconn) send(frames ...[]byte) error {
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = flagMore
		}
		if err := z.writeFrame(flags, f); err != nil {
			return err
		}
	}
	return nil
}

// readFrame reads one frame of at most max bytes.
func (z *zconn) readFrame(max int) (flags byte, body []byte, err error) {
	flags, err = z.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	var size uint64
	if flags&flagLong != 0 {
		var b [8]byte
		if _, err := io.ReadFull(z.r, b[:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := z.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		size = uint64(b)
	}
	if size > uint64(max) {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes, at most %d", errWire, size, max)
	}
	body = make([]byte, size)
	if _, err := io.ReadFull(z.r, body); err != nil {
		return 0, nil, err
	}
	return flags, body, nil
}

// recv reads the next message (commands, such as heartbeats, are
// skipped): at most maxWireFrames frames of maxWireMessage bytes in all.
func (z *zconn) recv() ([][]byte, error) {
	var frames [][]byte
	left := maxWireMessage
	for {
		flags, body, err := z.readFrame(left)
		if err != nil {
			return nil, err
		}
		if flags&flagCommand != 0 {
			if len(frames) > 0 {
				return nil, fmt.Errorf("%w: a command inside a message", errZMTP)
			}
			continue
		}
		left -= len(body)
		frames = append(frames, body)
		if flags&flagMore == 0 {
			return frames, nil
		}
		if len(frames) == maxWireFrames {
			return nil, fmt.Errorf("%w: more than %d frames in a message", errWire, maxWireFrames)
		}
	}
}

func (z *zconn) close() error {
	if z.stop != nil {
		z.stop()
	}
	return z.c.Close()
}

// subscribe sends the subscription to topic (ZMTP 3.0's form, which 3.1
// peers accept too).
func (z *zconn) subscribe(topic string) error {
	return z.send(append([]byte{1}, topic...))
}
