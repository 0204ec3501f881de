package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// peer plays a ZMTP 3 publisher on c: greeting and READY, then writes raw.
func peer(t *testing.T, c net.Conn, raw []byte) {
	var g [64]byte
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	c.Write(g[:])
	var in [64]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return
	}
	ready := appendProp([]byte("\x05READY"), "Socket-Type", "PUB")
	c.Write(append([]byte{flagCommand, byte(len(ready))}, ready...))
	go io.Copy(io.Discard, c) // the subscriber's READY and subscription
	c.Write(raw)
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A message beyond the bounds fails the read before its body is
// allocated: a frame longer than a message may be, or too many frames.
func TestZMTPBounds(t *testing.T) {
	long := binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<40)
	var many []byte
	for range maxWireFrames + 1 {
		many = append(many, flagMore, 1, 'x')
	}
	ok := []byte{flagMore, 1, 't', flagMore, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0x90}
	tests := []struct {
		name    string
		raw     []byte
		wantErr bool
	}{
		{"a frame of 2^40 bytes", long, true},
		{"too many frames", many, true},
		{"a ping, then a message", append([]byte{flagCommand, 5, 4, 'P', 'I', 'N', 'G'}, ok...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpPair(t)
			defer a.Close()
			go peer(t, b, tt.raw)
			z, err := handshake(context.Background(), a, "SUB", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer z.close()
			frames, err := z.recv()
			if tt.wantErr {
				if !errors.Is(err, errWire) {
					t.Fatalf("recv() = %d frames, %v, want errWire", len(frames), err)
				}
				return
			}
			if err != nil || len(frames) != 3 || string(frames[0]) != "t" {
				t.Fatalf("recv() = %q, %v", frames, err)
			}
		})
	}
}

// A peer that is no ZMTP 3 peer, or that uses another mechanism, is
// refused at the handshake.
func TestZMTPHandshakeRefused(t *testing.T) {
	for name, g := range map[string][]byte{
		"http":  []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 40))),
		"PLAIN": append(append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0}, "PLAIN"...), make([]byte, 47)...),
	} {
		t.Run(name, func(t *testing.T) {
			a, b := tcpPair(t)
			defer a.Close()
			go func() { b.Write(g); io.Copy(io.Discard, b) }()
			if _, err := handshake(context.Background(), a, "SUB", 5*time.Second); !errors.Is(err, errZMTP) {
				t.Errorf("handshake() = %v, want errZMTP", err)
			}
			b.Close()
		})
	}
}
