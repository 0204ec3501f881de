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
	if !r.TLS && r.TLSCAFile == "" && r.TLSCertFile == "" && r.TLSKeyFile == "" && r.TLSServerName == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLSServerName}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, invalid("state.redis.tls_ca_file", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid("state.redis.tls_ca_file", "%s holds no PEM certificate", r.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case r.TLSCertFile != "" && r.TLSKeyFile == "":
		return nil, invalid("state.redis.tls_key_file", "required with tls_cert_file")
	case r.TLSKeyFile != "" && r.TLSCertFile == "":
		return nil, invalid("state.redis.tls_cert_file", "required with tls_key_file")
	case r.TLSCertFile != "":
		for _, f := range []struct{ key, path string }{{"tls_cert_file", r.TLSCertFile}, {"tls_key_file", r.TLSKeyFile}} {
			if _, err := os.Stat(f.path); err != nil {
				return nil, invalid("state.redis."+f.key, "%v", err)
			}
		}
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, invalid("state.redis.tls_cert_file", "with tls_key_file: %v", err)
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
