//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// freePort's range hands out the free ports of the range in turn, every
// other one from a random one, skips a port in use and wraps around. (Other ports of the
// range may be in use too: the range is around a port the kernel picked.)
func TestPortsTakeFromTheirRange(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	lo := max(busy-4, 1024)
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
	for port, n := range seen { // in turn: 18 takes are two rounds at most
		if n > 2 {
			t.Errorf("port %d taken %d times in 18 takes of a range of ten: %v", port, n, seen)
		}
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
