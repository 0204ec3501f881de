//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// freePort's range hands out the free ports of the range in turn, every
// other one from a random one, skips a port in use and wraps around. The
// range lies above the kernel's ephemeral ports where it can (nothing else
// binds there, so a round is exactly the range's free ports), else around
// a port the kernel picked, where other ports may come and go.
func TestPortsTakeFromTheirRange(t *testing.T) {
	l, lo, quiet := busyRange(t)
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	var p ports
	if err := p.set(fmt.Sprintf("%d-%d", lo, lo+9)); err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	last := 0
	for i := range 18 {
		port := p.take()
		if d := port - last; i > 0 && (d == 1 || d == -1) {
			t.Fatalf("take() = %d after %d: the port above or below the last (a test may bind the one above a port it was given)", port, last)
		}
		last = port
		if port < lo || port > lo+9 {
			t.Fatalf("take() = %d, outside %d-%d", port, lo, lo+9)
		}
		if port == busy {
			t.Fatalf("take() = %d, a port in use", port)
		}
		seen[port]++
	}
	// In turn: every free port of the range is taken as often as any other,
	// give or take one; around the kernel's pick, where a port may be in use
	// for one round and free the next, give or take two.
	lo2, hi2 := 18, 0
	for _, n := range seen {
		lo2, hi2 = min(lo2, n), max(hi2, n)
	}
	if spread := hi2 - lo2; spread > 2 || quiet && spread > 1 || len(seen) < 5 {
		t.Errorf("18 takes of a range of ten not in turn: %v", seen)
	}
	for _, bad := range []string{"", "20000", "x-y", "1000-2000", "3000-2000", "60000-70000"} {
		if err := p.set(bad); err == nil {
			t.Errorf("set(%q) = nil, want an error", bad)
		}
	}
}

// The default range lies below the kernel's ephemeral ports, where no
// outgoing connection takes a port between freePort and a child's bind.
func TestDefaultPortsBelowEphemeral(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	eph, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	r := defaultPorts()
	if r == "" {
		if eph-24000 >= 1000 {
			t.Fatalf("defaultPorts() = \"\" with ephemeral ports from %d", eph)
		}
		return
	}
	var p ports
	if err := p.set(r); err != nil {
		t.Fatalf("defaultPorts() = %q: %v", r, err)
	}
	if p.hi >= eph || p.hi-p.lo < 999 {
		t.Errorf("defaultPorts() = %q with ephemeral ports from %d", r, eph)
	}
}

// busyRange returns a listener on a port of the ten from lo: above the
// ephemeral range when there is room (quiet), else the kernel's pick.
func busyRange(t *testing.T) (l net.Listener, lo int, quiet bool) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if hi, err := strconv.Atoi(f[1]); err == nil && hi+1 <= 65535-100 {
				for range 20 {
					lo := hi + 1 + rand.IntN(65535-hi-10)
					if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+4)); err == nil {
						return l, lo, true
					}
				}
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, max(l.Addr().(*net.TCPAddr).Port-4, 1024), false
}
