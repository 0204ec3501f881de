package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI writes a throwaway CA and a certificate it signed for 127.0.0.1
// and "redis.test" (usable as server or client certificate) into dir, and
// returns the three PEM paths.
func testPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dualmap test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testPKI(t, dir)
	redis := "state:\n  backend: redis\n  redis:\n    addrs: [127.0.0.1:6379]\n"
	t.Run("off", func(t *testing.T) {
		c, err := Parse([]byte(minimal+redis), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc, err := c.RedisTLS(); tc != nil || err != nil {
			t.Errorf("RedisTLS() = %v, %v, want nil, nil", tc, err)
		}
	})
	t.Run("system roots", func(t *testing.T) {
		c, err := Parse([]byte(minimal+redis+"    tls: true\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		tc, err := c.RedisTLS()
		if err != nil || tc == nil || tc.RootCAs != nil || tc.MinVersion != tls.VersionTLS12 || len(tc.Certificates) != 0 {
			t.Errorf("RedisTLS() = %+v, %v, want TLS 1.2+ with the system roots", tc, err)
		}
	})
	t.Run("CA, client certificate and server name", func(t *testing.T) {
		y := minimal + redis + "    tls_ca_file: " + ca + "\n    tls_cert_file: " + cert + "\n    tls_key_file: " + key + "\n    tls_server_name: redis.test\n"
		c, err := Parse([]byte(y), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !c.State.Redis.TLS {
			t.Errorf("tls_* keys did not turn TLS on")
		}
		tc, err := c.RedisTLS()
		if err != nil {
			t.Fatal(err)
		}
		if tc.ServerName != "redis.test" || len(tc.Certificates) != 1 || tc.RootCAs == nil {
			t.Fatalf("RedisTLS() = %+v, want the CA pool, one certificate, server name redis.test", tc)
		}
		// The pool verifies the leaf; the system roots would not.
		leaf, err := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: tc.RootCAs, DNSName: "redis.test"}); err != nil {
			t.Errorf("leaf does not verify against tls_ca_file: %v", err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "redis.test"}); err == nil {
			t.Errorf("throwaway leaf verifies against the system roots; the test proves nothing")
		}
	})
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	for _, tt := range []struct{ name, yaml, want string }{
		{"missing CA", "    tls_ca_file: " + filepath.Join(dir, "nope.pem") + "\n", "state.redis.tls_ca_file"},
		{"CA without PEM", "    tls_ca_file: " + garbage + "\n", "state.redis.tls_ca_file"},
		{"cert without key", "    tls_cert_file: " + cert + "\n", "state.redis.tls_key_file: required"},
		{"key without cert", "    tls_key_file: " + key + "\n", "state.redis.tls_cert_file: required"},
		{"missing key file", "    tls_cert_file: " + cert + "\n    tls_key_file: " + filepath.Join(dir, "nope.pem") + "\n", "state.redis.tls_key_file"},
		{"mismatched pair", "    tls_cert_file: " + cert + "\n    tls_key_file: " + ca + "\n", "state.redis.tls_cert_file"},
		{"sentinel without master", "    sentinel_username: s\n", "state.redis.sentinel_username"},
		{"sentinel password file without master", "    sentinel_password_file: " + cert + "\n", "state.redis.sentinel_password_file: needs master_name"},
		{"missing sentinel password file", "    master_name: m\n    sentinel_password_file: " + filepath.Join(dir, "nope") + "\n", "state.redis.sentinel_password_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal+redis+tt.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestSecretsFromFileOrEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	env := map[string]string{
		"DUALMAP_REDIS_SENTINEL_PASSWORD": "sentinel-env",
		"DUALMAP_ADMIN_TOKEN":             "token-env",
	}
	getenv := func(k string) string { return env[k] }
	y := minimal + "state: {redis: {master_name: m, addrs: ['127.0.0.1:26379'], sentinel_username: s}}\n"
	c, err := Parse([]byte(y), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.SentinelPassword(getenv); got != "sentinel-env" || err != nil {
		t.Errorf("SentinelPassword() = %q, %v, want sentinel-env", got, err)
	}
	if got, err := c.AdminToken(getenv); got != "token-env" || err != nil {
		t.Errorf("AdminToken() = %q, %v, want token-env", got, err)
	}
	c, err = Parse([]byte(y+"admin: {token_file: "+file+"}\n"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.AdminToken(getenv); got != "from-file" || err != nil {
		t.Errorf("AdminToken() = %q, %v, want from-file (the file wins)", got, err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	if _, err := Parse([]byte(minimal+"admin: {token_file: "+empty+"}\n"), nil); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("Parse(empty token file) error = %v, want one naming admin.token_file", err)
	}
}

func TestGRPCBounds(t *testing.T) {
	c, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPC.MaxConcurrentStreams != DefaultMaxConcurrentStreams || c.GRPC.MaxConnectionAge != time.Hour || c.GRPC.KeepaliveTime != time.Minute {
		t.Errorf("GRPC defaults = %+v", c.GRPC)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"grpc: {max_concurrent_streams: -1}\n", "grpc.max_concurrent_streams"},
		{"grpc: {keepalive_time: 10ms}\n", "grpc.keepalive_time"},
		{"grpc: {max_connection_age: 1s}\n", "grpc.max_connection_age"},
	} {
		if _, err := Parse([]byte(minimal+tt.yaml), nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want one naming %s", tt.yaml, err, tt.want)
		}
	}
	if c, err := Parse([]byte(minimal+"grpc: {max_connection_age: -1s}\n"), nil); err != nil || c.GRPC.MaxConnectionAge >= 0 {
		t.Errorf("Parse(max_connection_age: -1s) = %v, %v, want negative (never)", c.GRPC.MaxConnectionAge, err)
	}
}
