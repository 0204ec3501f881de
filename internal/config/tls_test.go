package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// grpc.tls and grpc.health: defaults, and every mistake names its key.
func TestGRPCTLSAndHealthKeys(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testPKI(t, dir)
	missing := filepath.Join(dir, "absent.pem")
	ok := []struct {
		name, yaml string
		mode       string
		health     string
	}{
		{"default: plaintext, no health port", "", TLSOff, ""},
		{"self-signed", "grpc: {tls: {mode: self-signed}}\n", TLSSelfSigned, ""},
		{"files implied by cert_file", "grpc: {tls: {cert_file: " + cert + ", key_file: " + key + "}}\n", TLSFiles, ""},
		{"mTLS", "grpc: {tls: {mode: self-signed, client_ca_file: " + ca + "}}\n", TLSSelfSigned, ""},
		{"health on 9003 of listen.grpc's host", "grpc: {health: {enabled: true}}\n", TLSOff, "127.0.0.1:9003"},
		{"health everywhere", "listen: {grpc: \":9002\"}\ngrpc: {health: {enabled: true}}\n", TLSOff, ":9003"},
		{"health elsewhere", "grpc: {health: {enabled: true, listen: \"0.0.0.0:19003\"}}\n", TLSOff, "0.0.0.0:19003"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(minimal+tt.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.GRPC.TLS.Mode != tt.mode || c.GRPC.Health.Listen != tt.health {
				t.Errorf("mode %q health %q, want %q %q", c.GRPC.TLS.Mode, c.GRPC.Health.Listen, tt.mode, tt.health)
			}
		})
	}
	bad := []struct {
		name, yaml, key, why string
	}{
		{"unknown mode", "grpc: {tls: {mode: on}}\n", "grpc.tls.mode", "is not off"},
		{"files without cert", "grpc: {tls: {mode: files, key_file: " + key + "}}\n", "grpc.tls.cert_file", "required"},
		{"files without key", "grpc: {tls: {mode: files, cert_file: " + cert + "}}\n", "grpc.tls.key_file", "required"},
		{"missing cert file", "grpc: {tls: {cert_file: " + missing + ", key_file: " + key + "}}\n", "grpc.tls.cert_file", "no such file"},
		{"missing key file", "grpc: {tls: {cert_file: " + cert + ", key_file: " + missing + "}}\n", "grpc.tls.key_file", "no such file"},
		{"key mismatch", "grpc: {tls: {cert_file: " + ca + ", key_file: " + key + "}}\n", "grpc.tls.cert_file", "does not match"},
		{"not PEM", "grpc: {tls: {cert_file: " + key + ", key_file: " + key + "}}\n", "grpc.tls.cert_file", "with grpc.tls.key_file"},
		{"cert with self-signed", "grpc: {tls: {mode: self-signed, cert_file: " + cert + "}}\n", "grpc.tls.cert_file", "needs grpc.tls.mode files"},
		{"client CA without TLS", "grpc: {tls: {client_ca_file: " + ca + "}}\n", "grpc.tls.client_ca_file", "mutual TLS needs"},
		{"missing client CA", "grpc: {tls: {mode: self-signed, client_ca_file: " + missing + "}}\n", "grpc.tls.client_ca_file", "no such file"},
		{"client CA not PEM", "grpc: {tls: {mode: self-signed, client_ca_file: " + key + "}}\n", "grpc.tls.client_ca_file", "no PEM certificate"},
		{"health listen without enabled", "grpc: {health: {listen: \":9003\"}}\n", "grpc.health.listen", "enabled is false"},
		{"health on the ext_proc port", "listen: {grpc: \":9002\"}\ngrpc: {health: {enabled: true, listen: \"127.0.0.1:9002\"}}\n", "grpc.health.listen", "also listen.grpc"},
		{"health on the admin port", "grpc: {health: {enabled: true, listen: \"127.0.0.1:9090\"}}\n", "grpc.health.listen", "also listen.admin"},
		{"health not host:port", "grpc: {health: {enabled: true, listen: \"9003\"}}\n", "grpc.health.listen", "not host:port"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal+tt.yaml), nil)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.key+":") || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("Parse = %v; want an ErrInvalid naming %s and saying %q", err, tt.key, tt.why)
			}
		})
	}
}
