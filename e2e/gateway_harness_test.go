//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// gatewayStack is the gateway configuration: Envoy from
// envoy/gateway-epp.yaml, routers from examples/gateway-epp.yaml (TLS
// self-signed, gRPC health on a port of their own, one endpoint per
// decision), four engines; every fixed port replaced by a free one.
type gatewayStack struct {
	*stack
	health []string // each router's gRPC health address
}

type gatewayOptions struct {
	routers int
	// edit changes the rendered router configuration (after the ports):
	// pairs of old, new text, each old found exactly once.
	edit []string
	// envoyEdit changes the rendered bootstrap: pairs of old, new text,
	// every occurrence of old (at least one) replaced.
	envoyEdit func(s *stack) []string
	// engineHosts, when set, is each engine's IP (default 127.0.0.1 for
	// all four): several ports on one IP are data-parallel ranks.
	engineHosts []string
	// routerEdit changes router i's rendered configuration once the
	// engines are up (after edit): pairs of old, new text, each old found
	// exactly once.
	routerEdit func(s *stack, i int) []string
}

// replaceOnce replaces old by new in s, failing the test unless old occurs
// exactly once (the example or bootstrap changed under the test).
func replaceOnce(t testing.TB, what, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want once", what, old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// eppEndpointRe is the EPP endpoint of envoy/gateway-epp.yaml: ext_proc on
// 9002, health checks on 9003.
var eppEndpointRe = regexp.MustCompile(`(?m)^(\s*)- endpoint:\n\s*address: \{socket_address: \{address: 127\.0\.0\.1, port_value: 9002\}\}\n\s*health_check_config: \{port_value: 9003\}\n`)

// startPickers starts the engines and o.routers routers configured from
// examples/gateway-epp.yaml (the gateway in front is the caller's).
func startPickers(t testing.TB, o gatewayOptions) *gatewayStack {
	t.Helper()
	if o.routers == 0 {
		o.routers = 1
	}
	s := &stack{t: t, dir: t.TempDir()}
	g := &gatewayStack{stack: s}
	startEngines(t, s, o.engineHosts)
	example, err := os.ReadFile(filepath.Join(repoRoot, "examples", "gateway-epp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(example)
	for i, e := range s.engines {
		base = replaceOnce(t, "examples/gateway-epp.yaml", base, fmt.Sprintf("address: 127.0.0.1:%d", 8001+i), "address: "+e.addr)
	}
	// Fast instance health checks, for the failure tests.
	base = replaceOnce(t, "examples/gateway-epp.yaml", base, "  interval: 5s\n", "  interval: 200ms\n  timeout: 500ms\n  backoff: 1s\n")
	for i := 0; i+1 < len(o.edit); i += 2 {
		base = replaceOnce(t, "router config edit", base, o.edit[i], o.edit[i+1])
	}
	for i := 0; i < o.routers; i++ {
		gp, ap, hp := freePort(t), freePort(t), freePort(t)
		cfg := base
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `grpc: ":9002"`, fmt.Sprintf(`grpc: "127.0.0.1:%d"`, gp))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `admin: ":9090"`, fmt.Sprintf(`admin: "127.0.0.1:%d"`, ap))
		cfg = replaceOnce(t, "examples/gateway-epp.yaml", cfg, `listen: ":9003"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, hp))
		if o.routerEdit != nil {
			edit := o.routerEdit(s, i)
			for j := 0; j+1 < len(edit); j += 2 {
				cfg = replaceOnce(t, "router config edit", cfg, edit[j], edit[j+1])
			}
		}
		path := filepath.Join(s.dir, fmt.Sprintf("router-%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, s.dir, fmt.Sprintf("router-%d", i), routerArgs(path)...)
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", gp), admin: fmt.Sprintf("127.0.0.1:%d", ap),
			health: fmt.Sprintf("127.0.0.1:%d", hp)})
		g.health = append(g.health, fmt.Sprintf("127.0.0.1:%d", hp))
	}
	for _, r := range s.routers {
		waitHTTP(t, "http://"+r.admin+"/readyz", 20*time.Second)
	}
	return g
}

// portOf is the port of a host:port address.
func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

func startGateway(t testing.TB, o gatewayOptions) *gatewayStack {
	t.Helper()
	g := startPickers(t, o)
	s := g.stack
	var eppEndpoints strings.Builder
	for _, r := range s.routers {
		fmt.Fprintf(&eppEndpoints, "%%[1]s- endpoint:\n%%[1]s    address: {socket_address: {address: 127.0.0.1, port_value: %s}}\n%%[1]s    health_check_config: {port_value: %s}\n",
			portOf(r.grpc), portOf(r.health))
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "gateway-epp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot := string(src)
	m := eppEndpointRe.FindStringSubmatch(boot)
	if m == nil {
		t.Fatal("envoy/gateway-epp.yaml: the EPP endpoint (9002, health 9003) not found")
	}
	boot = eppEndpointRe.ReplaceAllLiteralString(boot, fmt.Sprintf(eppEndpoints.String(), m[1]))
	listen, admin := freePort(t), freePort(t)
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 8080", fmt.Sprintf("port_value: %d", listen))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, "port_value: 9901", fmt.Sprintf("port_value: %d", admin))
	boot = replaceOnce(t, "envoy/gateway-epp.yaml", boot, `["127.0.0.1:8001", "127.0.0.1:8002"]`,
		fmt.Sprintf("[%q, %q]", s.engines[0].addr, s.engines[1].addr))
	if o.envoyEdit != nil {
		edit := o.envoyEdit(s)
		for i := 0; i+1 < len(edit); i += 2 {
			if !strings.Contains(boot, edit[i]) {
				t.Fatalf("envoy/gateway-epp.yaml: %q not found", edit[i])
			}
			boot = strings.ReplaceAll(boot, edit[i], edit[i+1])
		}
	}
	s.startEnvoy(t, boot, listen, admin)
	// The EPP cluster's first health checks have passed.
	for i := range s.routers {
		g.waitEPPHealth(t, i, true)
	}
	return g
}

// startEngines starts four simulated engines on free ports of the hosts
// given (default 127.0.0.1), named by their address, and waits for them.
func startEngines(t testing.TB, s *stack, hosts []string) {
	t.Helper()
	for i := 0; i < 4; i++ {
		host := "127.0.0.1"
		if i < len(hosts) {
			host = hosts[i]
		}
		addr := fmt.Sprintf("%s:%d", host, freePort(t))
		p := startProc(t, s.dir, fmt.Sprintf("engine-%d", i), dualmapBin, "engine", "--listen", addr,
			"--time-scale", "50", "--name", addr, "--block-size", "16")
		s.engines = append(s.engines, &engineProc{proc: p, addr: addr})
	}
	for _, e := range s.engines {
		waitHTTP(t, "http://"+e.addr+"/health", 20*time.Second)
	}
}

// routerArgs is the command line of a router on the configuration file
// given.
func routerArgs(path string) []string {
	return []string{dualmapBin, "serve", "--config", path, "--shutdown-grace", "2s"}
}

// restartRouter starts router i again on its configuration file (after a
// kill), with the same ports, and waits until it is ready.
func (s *stack) restartRouter(t testing.TB, i int, n int) {
	t.Helper()
	path := filepath.Join(s.dir, fmt.Sprintf("router-%d.yaml", i))
	r := s.routers[i]
	r.proc = startProc(t, s.dir, fmt.Sprintf("router-%d-restart-%d", i, n), routerArgs(path)...)
	waitHTTP(t, "http://"+r.admin+"/readyz", faultWait)
}

// envoyGet returns the body of an Envoy admin page.
func (s *stack) envoyGet(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get(s.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// envoyStat reads one counter or gauge from Envoy's /stats (0 if absent).
func (s *stack) envoyStat(t testing.TB, name string) int {
	t.Helper()
	body := s.envoyGet(t, "/stats?filter="+regexp.QuoteMeta(name)+"$")
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && k == name {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// eppHealthy reports whether Envoy's EPP cluster counts router i healthy
// (no health flag but "healthy" on its /clusters line).
func (g *gatewayStack) eppHealthy(t testing.TB, i int) bool {
	t.Helper()
	// The picker's cluster: endpointpicker, or another whose name starts
	// so (a second pool's picker).
	key := "::" + g.routers[i].grpc + "::health_flags::"
	for _, line := range strings.Split(g.envoyGet(t, "/clusters"), "\n") {
		if c, flags, ok := strings.Cut(line, key); ok && strings.HasPrefix(c, "endpointpicker") {
			return flags == "healthy"
		}
	}
	return false
}

// waitEPPHealth waits until Envoy sees router i as healthy (or not).
func (g *gatewayStack) waitEPPHealth(t testing.TB, i int, healthy bool) {
	t.Helper()
	deadline := time.Now().Add(faultWait)
	for g.eppHealthy(t, i) != healthy {
		if time.Now().After(deadline) {
			t.Fatalf("Envoy's EPP cluster: router %d healthy = %v after %v, want %v\n%s", i, !healthy, faultWait, healthy, g.envoyGet(t, "/clusters"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grpcHealth asks router i's health port about service svc.
func (g *gatewayStack) grpcHealth(t testing.TB, i int, svc string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(g.health[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatalf("router %d health %q: %v", i, svc, err)
	}
	return r.Status
}
