package config

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTLSRedis runs redis-server on loopback with TLS only, presenting
// cert (signed by ca) and requiring a client certificate signed by ca. It
// skips the test without a redis-server built with TLS.
func startTLSRedis(t *testing.T, ca, cert, key string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes",
		"--save", "", "--appendonly", "no", "--dir", dir)
	out, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			// A build without TLS refuses the tls-* directives.
			if strings.Contains(string(log), "Bad directive") {
				t.Skipf("redis-server without TLS support: %s", log)
			}
			t.Fatalf("redis-server --tls-port did not come up:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The TLS configuration built from the file connects to a real TLS Redis
// that checks client certificates; without the CA, the client certificate
// or the right server name it does not.
func TestRedisTLSAgainstRedisServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	dir := t.TempDir()
	ca, cert, key := testPKI(t, dir)
	addr := startTLSRedis(t, ca, cert, key)
	base := minimal + "state:\n  backend: redis\n  redis:\n    addrs: [" + addr + "]\n"
	full := "    tls_ca_file: " + ca + "\n    tls_cert_file: " + cert + "\n    tls_key_file: " + key + "\n"
	tests := []struct {
		name, yaml string
		ok         bool
	}{
		{"CA, client certificate", full, true},
		{"CA, client certificate, server name", full + "    tls_server_name: redis.test\n", true},
		{"wrong server name", full + "    tls_server_name: other.test\n", false},
		{"no client certificate", "    tls_ca_file: " + ca + "\n", false},
		{"system roots", "    tls: true\n    tls_cert_file: " + cert + "\n    tls_key_file: " + key + "\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(base+tt.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := c.RedisTLS()
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tc, MaxRetries: -1, DialTimeout: 2 * time.Second})
			defer rdb.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err = rdb.Ping(ctx).Err()
			if (err == nil) != tt.ok {
				t.Errorf("PING over TLS: error %v, want success %v", err, tt.ok)
			}
		})
	}
}
