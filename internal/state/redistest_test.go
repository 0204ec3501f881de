package state

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// redisBinary is where Debian's redis-server package installs the server.
const redisBinary = "/usr/bin/redis-server"

// startRedis runs a throwaway redis-server (no persistence) on a free
// loopback port and returns its address. stop kills it (SIGKILL, like a
// crash; idempotent); restart kills it if it runs and starts a fresh, empty
// one on the same port. The server is stopped when the test ends. Without
// the binary the test is skipped, or fails when DUALMAP_REQUIRE_REDIS=1
// (CI).
func startRedis(t testing.TB) (addr string, stop func(), restart func()) {
	t.Helper()
	bin := redisServer(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	port := strconv.Itoa(freePort(t))
	addr = net.JoinHostPort("127.0.0.1", port)

	var (
		mu     sync.Mutex
		proc   *os.Process
		exited chan struct{}
	)
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		if proc == nil {
			return
		}
		_ = proc.Kill()
		<-exited
		proc = nil
	}
	start := func() {
		mu.Lock()
		defer mu.Unlock()
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("redis log: %v", err)
		}
		defer logf.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c := exec.Command(bin, "--port", port, "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir)
			c.Stdout, c.Stderr = logf, logf
			if err := c.Start(); err != nil {
				t.Fatalf("start %s: %v", bin, err)
			}
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			if waitPing(addr, done, deadline) {
				proc, exited = c.Process, done
				return
			}
			_ = c.Process.Kill()
			<-done
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("redis-server on %s did not answer PING within 5s; log:\n%s", addr, log)
			}
			time.Sleep(50 * time.Millisecond) // the port may still be held by the last one
		}
	}
	restart = func() { stop(); start() }
	start()
	t.Cleanup(stop)
	return addr, stop, restart
}

// redisServer returns the path of redis-server. Without it the test is
// skipped, or fails when DUALMAP_REQUIRE_REDIS=1 (CI).
func redisServer(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(redisBinary); err == nil {
		return redisBinary
	}
	p, err := exec.LookPath("redis-server")
	switch {
	case err == nil:
		return p
	case os.Getenv("DUALMAP_REQUIRE_REDIS") == "1":
		t.Fatalf("redis-server not found at %s or on PATH, and DUALMAP_REQUIRE_REDIS=1 (apt-get install -y redis-server)", redisBinary)
	default:
		t.Skipf("redis-server not found at %s or on PATH: skipping (apt-get install -y redis-server; DUALMAP_REQUIRE_REDIS=1 makes this a failure)", redisBinary)
	}
	return ""
}

// waitPing reports whether the server at addr answered PING before
// deadline, giving up early if the process exited.
func waitPing(addr string, exited <-chan struct{}, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if ping(addr) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
