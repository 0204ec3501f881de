package state

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// fakeRedis is a hostile RESP server on loopback: it completes go-redis's
// connection handshake (HELLO refused, so the client speaks RESP2; CLIENT
// and PING answered) and answers every other command with answer.
type fakeRedis struct {
	ln     net.Listener
	answer func(c net.Conn) bool // false ends the connection
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startFakeRedis(t *testing.T, answer func(c net.Conn) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	f := &fakeRedis{ln: ln, answer: answer}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return ln.Addr().String()
}

func (f *fakeRedis) serve(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	for {
		name, err := readCommand(rd)
		if err != nil {
			return
		}
		var reply string
		switch name {
		case "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case "CLIENT", "SELECT", "AUTH":
			reply = "+OK\r\n"
		case "PING":
			reply = "+PONG\r\n"
		default:
			if !f.answer(c) {
				return
			}
			continue
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// readCommand reads one command (an array of bulk strings) and returns its
// name in upper case.
func readCommand(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "*") {
		return "", fmt.Errorf("not a command: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", err
	}
	var name string
	for i := range n {
		line, err := rd.ReadString('\n')
		if err != nil {
			return "", err
		}
		l, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return "", err
		}
		arg := make([]byte, l+2)
		if _, err := io.ReadFull(rd, arg); err != nil {
			return "", err
		}
		if i == 0 {
			name = strings.ToUpper(string(arg[:l]))
		}
	}
	return name, nil
}

// totalAlloc returns the bytes allocated so far by the process.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestHostileServer runs a replica against a Redis that answers its
// commands with absurd lengths, garbage, slow replies or resets: the
// replica keeps running on its own view (Redis down, remote loads zero,
// requests routed), allocates next to nothing, and the counters say why.
func TestHostileServer(t *testing.T) {
	write := func(s string) func(net.Conn) bool {
		return func(c net.Conn) bool {
			_, err := io.WriteString(c, s)
			return err == nil
		}
	}
	tests := []struct {
		name    string
		answer  func(net.Conn) bool
		refused bool // the guard must close the connection
		mod     func(*RedisOptions)
	}{
		{"bulk of 2^63 bytes", write("$9223372036854775807\r\n"), true, nil},
		{"bulk of 256 MiB", write("$268435456\r\n"), true, nil},
		{"array of 2^62 elements", write("*4611686018427387904\r\n"), true, nil},
		{"nested arrays of 2^19", write(strings.Repeat("*524288\r\n", 8)), true, nil},
		{"map of 2^40 pairs", write("%1099511627776\r\n"), true, nil},
		{"endless line", write("+" + strings.Repeat("A", 1<<18)), true, func(o *RedisOptions) { o.MaxReplyBytes = 1 << 17 }},
		{"many bulks within the size, above the total", write("*1000\r\n" + strings.Repeat("$131072\r\n"+strings.Repeat("B", 131072)+"\r\n", 3)), true, func(o *RedisOptions) {
			o.MaxReplyBytes, o.MaxReplyTotal = 1<<17, 1<<18
		}},
		{"garbage", write("\x00\xff garbage \x13\r\n"), true, nil},
		{"slow replies", func(c net.Conn) bool {
			time.Sleep(1500 * time.Millisecond) // past the client's 1s read timeout
			_, err := io.WriteString(c, "+OK\r\n")
			return err == nil
		}, false, nil},
		{"reset", func(c net.Conn) bool {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close sends RST
			}
			return false
		}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startFakeRedis(t, tt.answer)
			runtime.GC()
			before := totalAlloc()
			r := newReplica(t, addr, "victim", tt.mod)
			eventually(t, 5*time.Second, func() string {
				st := r.store.Stats()
				switch {
				case st.Outages == 0 || st.Up:
					return fmt.Sprintf("Stats() = %+v, want Redis down", st)
				case tt.refused && st.RefusedReplies == 0:
					return fmt.Sprintf("Stats().RefusedReplies = 0, want > 0 (%+v)", st)
				}
				return ""
			})
			time.Sleep(300 * time.Millisecond) // a few more attempts
			r.route(t, testPrompt(1, 8))
			for id, l := range r.remote() {
				if l != (scheduler.Load{}) {
					t.Errorf("remote load of %s = %+v, want zero", id, l)
				}
			}
			st := r.store.Stats()
			if !tt.refused && st.RefusedReplies != 0 {
				t.Errorf("Stats().RefusedReplies = %d, want 0 for a well-formed reply", st.RefusedReplies)
			}
			if st.Panics != 0 {
				t.Errorf("Stats().Panics = %d, want 0", st.Panics)
			}
			r.stop(t)
			if grew := totalAlloc() - before; grew > 16<<20 {
				t.Errorf("allocated %d MiB while attacked, want under 16 MiB", grew>>20)
			}
		})
	}
}
