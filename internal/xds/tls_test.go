package xds

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// selfSigned is a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xds.test"},
		DNSNames: []string{"xds.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// The subscription runs over TLS, verifying the server; a client that
// does not trust the server's certificate never gets a stream up.
func TestClientTLS(t *testing.T) {
	cert, roots := selfSigned(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeADS{push: make(chan *discoveryv3.DiscoveryResponse), reqs: make(chan *discoveryv3.DiscoveryRequest, 16)}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, f)
	go g.Serve(lis)
	defer g.Stop()

	for _, tt := range []struct {
		name    string
		tls     *tls.Config
		trusted bool
	}{
		{"trusted", &tls.Config{RootCAs: roots, ServerName: "xds.test", MinVersion: tls.VersionTLS12}, true},
		{"untrusted", &tls.Config{ServerName: "xds.test", MinVersion: tls.VersionTLS12}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Options{Address: lis.Addr().String(), Cluster: "c", TLS: tt.tls, Backoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { c.Run(ctx, func([]Endpoint) error { return nil }); close(done) }()
			defer func() { cancel(); <-done }()
			if !tt.trusted {
				time.Sleep(500 * time.Millisecond)
				if up, _ := c.Since(); up {
					t.Fatal("Since() = up with an untrusted server certificate")
				}
				select {
				case r := <-f.reqs:
					t.Fatalf("the server got a request over an untrusted connection: %v", r)
				default:
				}
				return
			}
			next(t, f)
			f.push <- response("v1", cla("c", lbEndpoint("10.0.0.1", 80)))
			if r := next(t, f); r.GetVersionInfo() != "v1" {
				t.Fatalf("after v1 over TLS: %v, want an ACK", r)
			}
		})
	}
}
