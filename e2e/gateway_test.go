//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The gateway configuration comes up as a gateway expects of an EPP:
// ext_proc on TLS with a self-signed certificate (Envoy connects without
// verifying it, as Envoy AI Gateway does), gRPC health on its own port
// answering liveness, readiness, "" and the ext_proc service, and Envoy's
// EPP cluster health-checking that port.
func TestGatewayTLSAndHealth(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	for _, svc := range []string{"liveness", "readiness", "", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		if st := g.grpcHealth(t, 0, svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health port %q = %v, want SERVING", svc, st)
		}
	}
	if n := g.envoyStat(t, "cluster.endpointpicker.health_check.success"); n < 1 {
		t.Errorf("Envoy's EPP health checks: %d successes, want some", n)
	}
	// The ext_proc port speaks TLS with a self-signed ECDSA certificate.
	conn, err := tls.Dial("tcp", g.routers[0].grpc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("TLS to the ext_proc port: %v", err)
	}
	cert := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if cert.Issuer.String() != cert.Subject.String() || cert.PublicKeyAlgorithm.String() != "ECDSA" {
		t.Errorf("ext_proc certificate: issuer %q subject %q key %v; want self-signed ECDSA", cert.Issuer, cert.Subject, cert.PublicKeyAlgorithm)
	}
	// A request through Envoy opens the EPP connection: one TLS handshake
	// that Envoy completes without verification.
	r := g.post("/v1/chat/completions", chatBody("tls "+systemPrompt, "hello", false, 4))
	if n := g.envoyStat(t, "cluster.endpointpicker.ssl.handshake"); n < 1 {
		t.Fatalf("Envoy's TLS handshakes with the EPP: %d, want at least 1 (request: %v)", n, r)
	}
	if n := g.envoyStat(t, "cluster.endpointpicker.ssl.connection_error"); n != 0 {
		t.Errorf("Envoy's TLS connection errors with the EPP: %d", n)
	}
	if r.status != 200 {
		t.Errorf("request through Envoy and the TLS EPP: %v", r)
	}
	t.Logf("TLS handshakes %d, EPP health checks ok %d, request %d served by %s",
		g.envoyStat(t, "cluster.endpointpicker.ssl.handshake"), g.envoyStat(t, "cluster.endpointpicker.health_check.success"), r.status, r.engine)
}

// Two EPP replicas behind Envoy: one killed, Envoy's health checks on its
// gRPC health port take it out, and the other serves; one whose pool has
// no ready instance answers NOT_SERVING on readiness.
func TestGatewayReplicaKilled(t *testing.T) {
	g := startGateway(t, gatewayOptions{routers: 2})
	g.routers[0].killNow()
	g.waitEPPHealth(t, 0, false)
	if !g.eppHealthy(t, 1) {
		t.Fatalf("the surviving replica is not healthy in Envoy:\n%s", g.envoyGet(t, "/clusters"))
	}
	failed := 0
	for i := 0; i < 20; i++ {
		if r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("after the kill %d %s", i, systemPrompt), "hi", false, 4)); r.status != 200 {
			failed++
			if failed == 1 {
				t.Errorf("after the replica died: %v", r)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of 20 requests failed after the dead replica was taken out", failed)
	}
	t.Logf("replica %s killed: Envoy marked it %q via health on %s; 20 requests after: %d failed",
		g.routers[0].grpc, "failed_active_hc", g.health[0], failed)
}

// Every instance of the pool failing its health check: readiness (and the
// ext_proc service Envoy checks) goes NOT_SERVING on the health port while
// liveness stays SERVING, and Envoy marks the replica unhealthy; the
// instances healthy again, the replica is back in both.
func TestGatewayReadinessFollowsInstances(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	setDown := func(down bool) {
		for _, e := range g.engines {
			resp, err := client.Post("http://"+e.addr+"/admin/fault", "application/json", strings.NewReader(fmt.Sprintf(`{"down":%v}`, down)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("fault on %s: status %d", e.addr, resp.StatusCode)
			}
		}
	}
	waitReadiness := func(want healthpb.HealthCheckResponse_ServingStatus) {
		deadline := time.Now().Add(faultWait)
		for g.grpcHealth(t, 0, "readiness") != want {
			if time.Now().After(deadline) {
				t.Fatalf("readiness not %v after %v", want, faultWait)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setDown(true)
	waitReadiness(healthpb.HealthCheckResponse_NOT_SERVING)
	if st := g.grpcHealth(t, 0, "liveness"); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness = %v with the instances down, want SERVING", st)
	}
	g.waitEPPHealth(t, 0, false)
	t.Logf("all instances down: readiness NOT_SERVING, liveness SERVING, Envoy: %s", eppLine(g, 0))
	setDown(false)
	waitReadiness(healthpb.HealthCheckResponse_SERVING)
	g.waitEPPHealth(t, 0, true)
	t.Logf("instances back: readiness SERVING, Envoy: %s", eppLine(g, 0))
}

func eppLine(g *gatewayStack, i int) string {
	for _, line := range strings.Split(g.envoyGet(g.t, "/clusters"), "\n") {
		if strings.HasPrefix(line, "endpointpicker::"+g.routers[i].grpc+"::health_flags::") {
			return line
		}
	}
	return ""
}
