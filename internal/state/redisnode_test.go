package state

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisNode is one redis-server process a test started (a Cluster node, a
// Sentinel, a primary or its replica) on a loopback port of its own.
type redisNode struct {
	name string
	addr string
	dir  string
	rdb  *redis.Client // of this node alone

	mu     sync.Mutex // guards proc and exited
	proc   *os.Process
	exited chan struct{}
}

// startNode runs redis-server in a new temp dir on a free loopback port,
// with a config file holding conf() (one directive a line; port, bind, dir
// and no persistence are added) followed on the command line by args (e.g.
// "--sentinel"). It waits up to 5s for PING to be answered. The process is
// killed when the test ends, and its log is shown if the test failed. A
// free port is found by listening on :0 and closing, so another process can
// take it first: the start is then retried on another port, calling conf
// again (it may pick free ports of its own).
func startNode(t testing.TB, name string, conf func() string, args ...string) *redisNode {
	t.Helper()
	bin := redisServer(t)
	n := &redisNode{name: name, dir: t.TempDir()}
	logPath := filepath.Join(n.dir, "redis.log")
	confPath := filepath.Join(n.dir, "redis.conf")
	deadline := time.Now().Add(5 * time.Second)
	for {
		port := freePort(t)
		n.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\nlogfile %s\n%s",
			port, n.dir, logPath, conf())
		if err := os.WriteFile(confPath, []byte(text), 0o644); err != nil {
			t.Fatalf("%s: write config: %v", name, err)
		}
		c := exec.Command(bin, append([]string{confPath}, args...)...)
		if err := c.Start(); err != nil {
			t.Fatalf("%s: start %s: %v", name, bin, err)
		}
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		if waitPing(n.addr, done, deadline) {
			n.proc, n.exited = c.Process, done
			break
		}
		_ = c.Process.Kill()
		<-done
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s: redis-server %s on %s did not answer PING within 5s; log:\n%s", name, strings.Join(args, " "), n.addr, log)
		}
	}
	n.rdb = redis.NewClient(&redis.Options{Addr: n.addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() {
		_ = n.rdb.Close()
		n.kill()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("%s (%s) log, last lines:\n%s", n.name, n.addr, tail(string(log), 25))
		}
	})
	return n
}

// kill sends SIGKILL, like a crash, and waits for the process to exit.
// Idempotent.
func (n *redisNode) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return
	}
	_ = n.proc.Kill()
	<-n.exited
	n.proc = nil
}

// port returns the node's port as a string.
func (n *redisNode) port() string {
	_, p, _ := net.SplitHostPort(n.addr)
	return p
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var redisVersionRE = regexp.MustCompile(`v=(\d+)\.`)

// requireRedisMajor skips the test, or fails it when
// DUALMAP_REQUIRE_REDIS=1, if redis-server is older than major.
func requireRedisMajor(t testing.TB, major int) {
	t.Helper()
	bin := redisServer(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	m := redisVersionRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version = %q: no version", bin, out)
	}
	if v, _ := strconv.Atoi(string(m[1])); v < major {
		msg := fmt.Sprintf("redis-server is version %s, this test needs %d or later", m[1], major)
		if os.Getenv("DUALMAP_REQUIRE_REDIS") == "1" {
			t.Fatal(msg + " and DUALMAP_REQUIRE_REDIS=1")
		}
		t.Skip(msg + ": skipping")
	}
}

// waitFor polls cond every 50ms until it returns "" or timeout passes,
// then fails with cond's last message. Unlike eventually, cond gets a
// context that ends at the deadline, for Redis calls.
func waitFor(t testing.TB, timeout time.Duration, cond func(ctx context.Context) string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		msg := cond(ctx)
		if msg == "" {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %v: %s", timeout, msg)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
