package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// secret reads a secret from file (at YAML path key) or else from the
// environment variable name: "" when neither is set.
func secret(key, file, name string, env func(string) string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("config: %s: %w", key, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if env != nil && name != "" {
		return env(name), nil
	}
	return "", nil
}

// RedisPassword returns the Redis password from the file or environment
// variable the configuration names ("" when neither is set).
func (c Config) RedisPassword(env func(string) string) (string, error) {
	r := c.State.Redis
	return secret("state.redis.password_file", r.PasswordFile, r.PasswordEnv, env)
}

// SentinelPassword returns the Sentinels' password from the file or
// environment variable the configuration names ("" when neither is set).
func (c Config) SentinelPassword(env func(string) string) (string, error) {
	r := c.State.Redis
	return secret("state.redis.sentinel_password_file", r.SentinelPasswordFile, r.SentinelPasswordEnv, env)
}

// RedisRecordKeys returns the record keys of state.redis.record_key_file,
// one per non-empty line, in order (nil when no file is named). Errors
// name the key: a file that cannot be read, without a key, with more
// than 4 or with one shorter than 16 bytes.
func (c Config) RedisRecordKeys() ([][]byte, error) {
	const at = "state.redis.record_key_file"
	f := c.State.Redis.RecordKeyFile
	if f == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, invalid(at, "%v", err)
	}
	var keys [][]byte
	for line := range strings.Lines(string(b)) {
		if k := strings.TrimRight(line, "\r\n"); k != "" {
			keys = append(keys, []byte(k))
		}
	}
	switch {
	case len(keys) == 0:
		return nil, invalid(at, "%s holds no key", f)
	case len(keys) > 4:
		return nil, invalid(at, "%s holds %d keys, at most 4 (one signs, the others are being rotated out)", f, len(keys))
	}
	for i, k := range keys {
		if len(k) < 16 {
			return nil, invalid(at, "key %d of %s has %d bytes, want at least 16", i+1, f, len(k))
		}
	}
	return keys, nil
}

// AdminToken returns the bearer token that guards the admin server's
// /debug/* endpoints ("" when none is configured: they are open).
func (c Config) AdminToken(env func(string) string) (string, error) {
	return secret("admin.token_file", c.Admin.TokenFile, c.Admin.TokenEnv, env)
}

// RedisTLS returns the TLS configuration of the Redis connections: nil
// without TLS; TLS 1.2 or later verified against the system's roots, or
// against state.redis.tls_ca_file, with the client certificate and server
// name when configured. Errors name the key.
func (c Config) RedisTLS() (*tls.Config, error) {
	r := c.State.Redis
	return tlsFiles{on: r.TLS, ca: r.TLSCAFile, cert: r.TLSCertFile, key: r.TLSKeyFile, server: r.TLSServerName}.config("state.redis.")
}

// tlsFiles are the tls_* keys of one client connection.
type tlsFiles struct {
	on                    bool
	ca, cert, key, server string
}

// config is the TLS client configuration of t (nil: TLS off), with errors
// naming the keys under at.
func (t tlsFiles) config(at string) (*tls.Config, error) {
	if !t.on && t.ca == "" && t.cert == "" && t.key == "" && t.server == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.server}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, invalid(at+"tls_ca_file", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid(at+"tls_ca_file", "%s holds no PEM certificate", t.ca)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.cert != "" && t.key == "":
		return nil, invalid(at+"tls_key_file", "required with tls_cert_file")
	case t.key != "" && t.cert == "":
		return nil, invalid(at+"tls_cert_file", "required with tls_key_file")
	case t.cert != "":
		for _, f := range []struct{ key, path string }{{"tls_cert_file", t.cert}, {"tls_key_file", t.key}} {
			if _, err := os.Stat(f.path); err != nil {
				return nil, invalid(at+f.key, "%v", err)
			}
		}
		cert, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, invalid(at+"tls_cert_file", "with tls_key_file: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// validSecrets checks the files that hold TLS material and secrets, so a
// bad path fails at load rather than at the first connection.
func (c Config) validSecrets() error {
	if _, err := c.RedisTLS(); err != nil {
		return err
	}
	r := c.State.Redis
	if r.MasterName == "" {
		switch {
		case r.SentinelUsername != "":
			return invalid("state.redis.sentinel_username", "needs master_name (Sentinel mode)")
		case r.SentinelPasswordFile != "":
			return invalid("state.redis.sentinel_password_file", "needs master_name (Sentinel mode)")
		}
	}
	for _, f := range []struct{ key, path string }{
		{"state.redis.password_file", r.PasswordFile},
		{"state.redis.sentinel_password_file", r.SentinelPasswordFile},
		{"admin.token_file", c.Admin.TokenFile},
	} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return invalid(f.key, "%v", err)
		}
		if strings.TrimRight(string(b), "\r\n") == "" {
			return invalid(f.key, "%s is empty", f.path)
		}
	}
	return nil
}
