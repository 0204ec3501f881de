package servetls

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dualmap/dualmap/internal/config"
)

// issued is a certificate with its key, signed by a CA (or by itself).
type issued struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func issue(t *testing.T, cn string, parent *issued, isCA bool, usage x509.ExtKeyUsage) *issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		BasicConstraintsValid: true, IsCA: isCA,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	pc, pk := tmpl, key
	if parent != nil {
		pc, pk = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, pc, &key.PublicKey, pk)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &issued{cert: c, key: key, der: der}
}

func (i *issued) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.der})
}

func (i *issued) keyPEM(t *testing.T) []byte {
	b, err := x509.MarshalECPrivateKey(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
}

func (i *issued) tlsCert() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{i.der}, PrivateKey: i.key}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serveHealth serves a gRPC health server with tc and returns its address.
func serveHealth(t *testing.T, tc *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// check makes one health call over a new connection with client TLS cc.
func check(addr string, cc *tls.Config) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cc)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// peerLeaf returns the certificate the server at addr presents.
func peerLeaf(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// A gateway's client (no verification) completes a gRPC call over the
// self-signed certificate; a verifying client refuses it.
func TestSelfSignedHandshake(t *testing.T) {
	tc, err := ServerConfig(config.TLS{Mode: config.TLSSelfSigned}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHealth(t, tc)
	if err := check(addr, &tls.Config{InsecureSkipVerify: true}); err != nil {
		t.Fatalf("health over self-signed TLS without verification: %v", err)
	}
	if err := check(addr, &tls.Config{ServerName: "localhost"}); err == nil {
		t.Fatal("a verifying client accepted the self-signed certificate")
	}
	leaf := peerLeaf(t, addr)
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !bytes.Equal(leaf.RawIssuer, leaf.RawSubject) {
		t.Errorf("certificate: key %T, issuer %q subject %q; want ECDSA, self-signed", leaf.PublicKey, leaf.Issuer, leaf.Subject)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Errorf("certificate does not verify against itself for localhost: %v", err)
	}
}

func TestOffIsPlaintext(t *testing.T) {
	tc, err := ServerConfig(config.TLS{Mode: config.TLSOff}, Options{})
	if tc != nil || err != nil {
		t.Fatalf("ServerConfig(off) = %v, %v; want nil, nil", tc, err)
	}
}

// syncBuf is a log sink safe for the handshake goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// New files are served after the next recheck without a restart; a bad new
// pair is logged and the certificate in service stays.
func TestFilesReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := issue(t, "ca", nil, true, 0)
	first := issue(t, "first", ca, false, x509.ExtKeyUsageServerAuth)
	write(t, certFile, first.certPEM())
	write(t, keyFile, first.keyPEM(t))
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(2 * recheck); mu.Unlock() }
	logs := &syncBuf{}
	tc, err := ServerConfig(config.TLS{Mode: config.TLSFiles, CertFile: certFile, KeyFile: keyFile},
		Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHealth(t, tc)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if err := check(addr, client); err != nil {
		t.Fatalf("health over the file certificate: %v", err)
	}
	if cn := peerLeaf(t, addr).Subject.CommonName; cn != "first" {
		t.Fatalf("serving %q, want first", cn)
	}

	second := issue(t, "second", ca, false, x509.ExtKeyUsageServerAuth)
	write(t, certFile, second.certPEM())
	write(t, keyFile, second.keyPEM(t))
	if cn := peerLeaf(t, addr).Subject.CommonName; cn != "first" {
		t.Fatalf("serving %q before the recheck interval, want first still", cn)
	}
	advance()
	if cn := peerLeaf(t, addr).Subject.CommonName; cn != "second" {
		t.Fatalf("serving %q after the files changed, want second", cn)
	}
	if err := check(addr, client); err != nil {
		t.Fatalf("health after the reload: %v", err)
	}

	// A certificate that does not match the key: the old pair stays.
	third := issue(t, "third", ca, false, x509.ExtKeyUsageServerAuth)
	write(t, certFile, third.certPEM())
	advance()
	if cn := peerLeaf(t, addr).Subject.CommonName; cn != "second" {
		t.Fatalf("serving %q after a mismatched pair, want second kept", cn)
	}
	if !strings.Contains(logs.String(), "keeping the certificate in service") {
		t.Errorf("no log of the refused pair; logs:\n%s", logs)
	}
	write(t, keyFile, third.keyPEM(t))
	advance()
	if cn := peerLeaf(t, addr).Subject.CommonName; cn != "third" {
		t.Fatalf("serving %q once the key matches, want third", cn)
	}
}

// With a client CA, a client without a certificate, or with one another CA
// signed, is refused; one the CA signed is served.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	ca := issue(t, "clients", nil, true, 0)
	write(t, caFile, ca.certPEM())
	tc, err := ServerConfig(config.TLS{Mode: config.TLSSelfSigned, ClientCAFile: caFile}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHealth(t, tc)
	if err := check(addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	other := issue(t, "other-ca", nil, true, 0)
	stranger := issue(t, "stranger", other, false, x509.ExtKeyUsageClientAuth)
	if err := check(addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{stranger.tlsCert()}}); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	gateway := issue(t, "gateway", ca, false, x509.ExtKeyUsageClientAuth)
	if err := check(addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{gateway.tlsCert()}}); err != nil {
		t.Fatalf("a client certificate the CA signed: %v", err)
	}
}
