package servetls

import (
	"crypto/tls"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dualmap/dualmap/internal/config"
)

// recheck is how often a handshake may look at the files again: at most
// one pair of stat calls per interval, whatever the handshake rate.
const recheck = time.Second

// fileStamp identifies one version of a file.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// reloader serves the certificate of a cert/key file pair and re-reads the
// pair when either file's modification time or size changes. A pair that
// fails to load (missing, half-written, mismatched) is logged once per
// change and the certificate loaded last stays in service.
type reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamps  [2]fileStamp // of the pair in service, or of the last failed attempt
	checked time.Time
}

func newReloader(certFile, keyFile string, log *slog.Logger, now func() time.Time) (*reloader, error) {
	r := &reloader{certFile: certFile, keyFile: keyFile, log: log, now: now}
	st, err := r.stamp()
	if err != nil {
		return nil, err
	}
	cert, err := config.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamps, r.checked = &cert, st, now()
	return r, nil
}

func (r *reloader) stamp() ([2]fileStamp, error) {
	c, err := stampOf(r.certFile)
	if err != nil {
		return [2]fileStamp{}, err
	}
	k, err := stampOf(r.keyFile)
	if err != nil {
		return [2]fileStamp{}, err
	}
	return [2]fileStamp{c, k}, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= recheck {
		r.checked = now
		r.maybeReload()
	}
	return r.cert, nil
}

// maybeReload re-reads the pair if it changed since the last attempt.
// Called with mu held.
func (r *reloader) maybeReload() {
	st, err := r.stamp()
	if err != nil {
		if r.stamps != ([2]fileStamp{}) {
			r.log.Error("grpc.tls: certificate files unreadable; keeping the certificate in service", "error", err)
			r.stamps = [2]fileStamp{}
		}
		return
	}
	if st == r.stamps {
		return
	}
	r.stamps = st
	cert, err := config.LoadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.log.Error("grpc.tls: new certificate files do not load; keeping the certificate in service", "error", err)
		return
	}
	r.cert = &cert
	r.log.Info("grpc.tls: certificate reloaded", "cert_file", r.certFile)
}
