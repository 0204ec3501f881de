package extproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// redisProc runs redis-server with args on a free loopback port until the
// test ends and returns the port.
func redisProc(t *testing.T, args ...string) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not found (apt-get install -y redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append(args, "--port", fmt.Sprint(port))...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 250; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return port
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server %v did not start", args)
	return 0
}

// A router reaches a password-protected primary through Sentinels that
// require their own user and password (state.redis.sentinel_username and
// the password from DUALMAP_REDIS_SENTINEL_PASSWORD); with a wrong
// Sentinel password it does not.
func TestSentinelAuth(t *testing.T) {
	primary := redisProc(t, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--requirepass", "primary-pw")
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	err := os.WriteFile(conf, []byte(fmt.Sprintf(`bind 127.0.0.1
dir %s
sentinel monitor m 127.0.0.1 %d 1
sentinel auth-pass m primary-pw
user default off
user router on >sentinel-pw +@all
`, dir, primary)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	sentinel := redisProc(t, conf, "--sentinel")
	cfgYAML := fmt.Sprintf(`pools:
  - instances: [{address: "10.0.0.1:8000"}]
state:
  backend: redis
  redis: {addrs: ["127.0.0.1:%d"], master_name: m, sentinel_username: router, heartbeat: 50ms}
`, sentinel)
	for _, tt := range []struct {
		name, sentinelPassword string
		up                     bool
	}{
		{"right password", "sentinel-pw", true},
		{"wrong password", "nope", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DUALMAP_REDIS_PASSWORD": "primary-pw", "DUALMAP_REDIS_SENTINEL_PASSWORD": tt.sentinelPassword}
			srv, err := New(parseConfig(t, cfgYAML), Options{Registry: prometheus.NewRegistry(), TickInterval: 10 * time.Millisecond,
				Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Run(ctx); close(done) }()
			defer func() { cancel(); <-done; srv.Close() }()
			up := func() bool { return srv.pools.Pools()[0].Store().Stats().Up }
			if tt.up {
				waitFor(t, "the store is up through the Sentinel", up)
				return
			}
			time.Sleep(time.Second)
			if up() {
				t.Errorf("store up with a wrong Sentinel password")
			}
		})
	}
}
