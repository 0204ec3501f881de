package extproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisWithPassword starts a redis-server on loopback that requires
// password, and returns its address.
func redisWithPassword(t *testing.T, password string) string {
	t.Helper()
	addr, _, _ := redisServerCtl(t, "--requirepass", password)
	return addr
}

// The password in state.redis.password_file (or the environment) is the one
// the router authenticates with: with it the router's heartbeats reach
// Redis, with a wrong one nothing does.
func TestRedisPasswordReachesRedis(t *testing.T) {
	const password = "correct horse battery staple"
	addr := redisWithPassword(t, password)
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	t.Cleanup(func() { admin.Close() })
	dir := t.TempDir()
	tests := []struct {
		name, file, env string // password file content ("": no file), DUALMAP_REDIS_PASSWORD
		prefix          string
		wantKeys        bool
	}{
		{name: "password file", file: password + "\n", env: "wrong", prefix: "fromfile", wantKeys: true},
		{name: "environment", env: password, prefix: "fromenv", wantKeys: true},
		{name: "wrong password file", file: "wrong\n", env: password, prefix: "wrongfile", wantKeys: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := fmt.Sprintf("pools:\n  - instances: [{address: %q}]\nstate:\n  backend: redis\n  redis:\n    addrs: [%q]\n    key_prefix: %s\n    heartbeat: 20ms\n",
				healthyInstance(t), addr, tt.prefix)
			if tt.file != "" {
				p := filepath.Join(dir, tt.prefix)
				if err := os.WriteFile(p, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
				y += "    password_file: " + p + "\n"
			}
			cfg := parseConfig(t, y)
			srv, err := New(cfg, Options{Getenv: func(k string) string {
				if k == "DUALMAP_REDIS_PASSWORD" {
					return tt.env
				}
				return ""
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done; srv.Close() })

			keys := func() []string {
				k, err := admin.Keys(context.Background(), "*"+tt.prefix+"*").Result()
				if err != nil {
					t.Fatalf("KEYS: %v", err)
				}
				return k
			}
			wait := 3 * time.Second
			if !tt.wantKeys {
				wait = time.Second // 50 heartbeats
			}
			deadline := time.Now().Add(wait)
			for len(keys()) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := len(keys()) > 0; got != tt.wantKeys {
				t.Errorf("router's keys in Redis after its heartbeats: %v, want %v (keys %v)", got, tt.wantKeys, keys())
			}
		})
	}
}
