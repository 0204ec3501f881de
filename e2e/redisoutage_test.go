//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Redis dies behind the gateway configuration (Envoy fails closed, and
// here without panic routing, so an EPP it counts unhealthy gets no
// requests at all): both routers stay healthy in Envoy's eyes and every
// request is still served; only the dualmap.state health service and
// /readyz's degraded line tell of the outage, and both recover with Redis.
func TestGatewayRedisOutage(t *testing.T) {
	rd := startRedis(t, t.TempDir())
	g := startGateway(t, gatewayOptions{
		routers: 2,
		edit:    []string{"limits:\n", fmt.Sprintf("state: {backend: redis, redis: {addrs: [%q]}}\nlimits:\n", rd.addr)},
		envoyEdit: func(*stack) []string {
			return []string{"    lb_policy: LEAST_REQUEST\n", "    lb_policy: LEAST_REQUEST\n    common_lb_config: {healthy_panic_threshold: {value: 0}}\n"}
		},
	})
	waitState := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for i := range g.routers {
			waitCond(t, fmt.Sprintf("router %d dualmap.state %v", i, want), 20*time.Second, func() bool {
				return g.grpcHealth(t, i, "dualmap.state") == want
			})
		}
	}
	post := func(n int, what string) {
		t.Helper()
		for i := 0; i < n; i++ {
			if r := g.post("/v1/chat/completions", chatBody(fmt.Sprintf("redis outage %d", i%4), "hi", false, 4)); r.status != 200 {
				t.Fatalf("%s: request %d: %v, want 200", what, i, r)
			}
		}
	}
	waitState(healthpb.HealthCheckResponse_SERVING)
	post(8, "Redis up")

	rd.p.killNow()
	waitState(healthpb.HealthCheckResponse_NOT_SERVING)
	// Envoy health-checks every second, one failure takes a router out:
	// three rounds.
	time.Sleep(3 * time.Second)
	for i := range g.routers {
		if !g.eppHealthy(t, i) {
			t.Errorf("router %d unhealthy in Envoy with Redis down:\n%s", i, g.envoyGet(t, "/clusters"))
		}
		if got := g.grpcHealth(t, i, "envoy.service.ext_proc.v3.ExternalProcessor"); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("router %d ext_proc health with Redis down = %v, want SERVING", i, got)
		}
		resp, err := http.Get("http://" + g.routers[i].admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "degraded: ") {
			t.Errorf("router %d /readyz with Redis down = %d %q, want 200 with a degraded line", i, resp.StatusCode, body)
		}
	}
	post(16, "Redis down")

	rd.start()
	waitState(healthpb.HealthCheckResponse_SERVING)
	post(4, "Redis back")
}
