package servetls

import (
	"crypto/tls"
	"io"
	"log/slog"
	"time"

	"github.com/dualmap/dualmap/internal/config"
)

// Options are ServerConfig's dependencies; zero values mean defaults.
type Options struct {
	Logger *slog.Logger     // default: discard
	Now    func() time.Time // default time.Now
}

// ServerConfig is the TLS configuration of the ext_proc listener for c,
// or nil when c.Mode is off (plaintext). TLS 1.2 or later; with
// c.ClientCAFile, clients must present a certificate that CA signed.
func ServerConfig(c config.TLS, opt Options) (*tls.Config, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch c.Mode {
	case "", config.TLSOff:
		return nil, nil
	case config.TLSSelfSigned:
		cert, err := SelfSigned(opt.Now())
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	default: // config.TLSFiles; Validate refuses other modes
		r, err := newReloader(c.CertFile, c.KeyFile, opt.Logger, opt.Now)
		if err != nil {
			return nil, err
		}
		tc.GetCertificate = r.GetCertificate
	}
	if c.ClientCAFile != "" {
		pool, err := config.LoadCAPool("grpc.tls.client_ca_file", c.ClientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
