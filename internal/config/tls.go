package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// validTLS checks grpc.tls: a known mode, the files each mode needs, that
// they can be read, and that the certificate matches the key, so a mistake
// fails at load (and in `dualmap config check`) with the key named.
func (c Config) validTLS() error {
	t := c.GRPC.TLS
	switch t.Mode {
	case TLSOff, TLSSelfSigned:
		switch {
		case t.CertFile != "":
			return invalid("grpc.tls.cert_file", "needs grpc.tls.mode %s, got %q", TLSFiles, t.Mode)
		case t.KeyFile != "":
			return invalid("grpc.tls.key_file", "needs grpc.tls.mode %s, got %q", TLSFiles, t.Mode)
		case t.Mode == TLSOff && t.ClientCAFile != "":
			return invalid("grpc.tls.client_ca_file", "mutual TLS needs grpc.tls.mode %s or %s", TLSSelfSigned, TLSFiles)
		}
	case TLSFiles:
		if _, err := LoadKeyPair(t.CertFile, t.KeyFile); err != nil {
			return err
		}
	default:
		return invalid("grpc.tls.mode", "%q is not %s, %s or %s", t.Mode, TLSOff, TLSSelfSigned, TLSFiles)
	}
	if t.ClientCAFile != "" {
		if _, err := LoadCAPool("grpc.tls.client_ca_file", t.ClientCAFile); err != nil {
			return err
		}
	}
	return nil
}

// LoadKeyPair reads the PEM certificate and key of grpc.tls; errors name
// the key at fault (a missing file, or a certificate that does not match
// the key).
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	switch {
	case certFile == "":
		return tls.Certificate{}, invalid("grpc.tls.cert_file", "required with grpc.tls.mode %s", TLSFiles)
	case keyFile == "":
		return tls.Certificate{}, invalid("grpc.tls.key_file", "required with grpc.tls.mode %s", TLSFiles)
	}
	for _, f := range []struct{ key, path string }{{"grpc.tls.cert_file", certFile}, {"grpc.tls.key_file", keyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return tls.Certificate{}, invalid(f.key, "%v", err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, invalid("grpc.tls.cert_file", "with grpc.tls.key_file: %v", err)
	}
	return cert, nil
}

// LoadCAPool reads a PEM bundle of CA certificates (at YAML path key).
func LoadCAPool(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, invalid(key, "%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, invalid(key, "%s holds no PEM certificate", path)
	}
	return pool, nil
}
