//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binaries built once per test run.
var (
	dualmapBin string
	envoyBin   string
	repoRoot   string
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	envoyBin = os.Getenv("DUALMAP_ENVOY")
	if envoyBin == "" {
		fmt.Fprintln(os.Stderr, "e2e: DUALMAP_ENVOY is not set; run `make e2e` (it installs Envoy with scripts/envoy.sh)")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "dualmap-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dualmapBin = filepath.Join(dir, "dualmap")
	build := exec.Command("go", "build", "-o", dualmapBin, "./cmd/dualmap")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building dualmap:", err)
		os.Exit(1)
	}
	if v := cmpOr(os.Getenv("DUALMAP_E2E_PORTS"), defaultPorts()); v != "" {
		if err := portRange.set(v); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// portRange confines freePort to the ports DUALMAP_E2E_PORTS names
// ("lo-hi", e.g. make demo's 25000-25999), handed out every other one in
// turn from a random one (take) and skipping any in use, so that runs on a shared machine stay
// within the ports they were given; unset, to defaultPorts.
var portRange ports

// defaultPorts is the range freePort takes from when DUALMAP_E2E_PORTS is
// unset: from 24000 to just below the kernel's ephemeral ports
// (ip_local_port_range). A port the kernel picks as free comes from the
// ephemeral range, where any outgoing connection may take it between
// freePort closing its listener and the child binding it: an engine of a
// peer benchmark once failed to start that way ("bind: address already in
// use", one stack in about twenty). "" (the kernel picks) where the range
// cannot be read or leaves fewer than 1,000 ports below it. From 24000:
// the simulator profiles' ZMQ endpoints (21999, 23999) must stay ports
// nothing listens on.
func defaultPorts() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return ""
	}
	lo, err := strconv.Atoi(f[0])
	const from = 24000
	if err != nil || lo-from < 1000 {
		return ""
	}
	return fmt.Sprintf("%d-%d", from, lo-1)
}

type ports struct {
	mu           sync.Mutex
	lo, hi, next int
}

func (p *ports) set(v string) error {
	a, b, ok := strings.Cut(v, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || lo < 1024 || hi > 65535 || hi < lo {
		return fmt.Errorf("DUALMAP_E2E_PORTS=%q: want lo-hi within 1024-65535", v)
	}
	// A random first port: two harnesses on one machine rarely walk the
	// same ports at the same time.
	p.lo, p.hi, p.next = lo, hi, lo+rand.IntN(hi-lo+1)
	return nil
}

// take returns the next port of the range, two above the last, that is
// free to listen on, or 0 when none is.
func (p *ports) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.hi - p.lo + 1 {
		port := p.next
		// Every other port, then the others: a test may bind the port
		// above one it was given (the KV tests' replay socket sits one
		// above the engine port plus kvOffset), which must not be the
		// next engine's.
		if p.next += 2; p.next > p.hi {
			p.next = p.lo + 1 - (p.next-p.lo)%2
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			l.Close()
			return port
		}
	}
	return 0
}

func freePort(t testing.TB) int {
	t.Helper()
	if portRange.lo > 0 {
		port := portRange.take()
		if port == 0 {
			t.Fatalf("no free port in DUALMAP_E2E_PORTS %d-%d", portRange.lo, portRange.hi)
		}
		return port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.kill(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("---- %s log (tail) ----\n%s", name, tail(logPath, 30))
		}
	})
	return p
}

func (p *proc) kill(sig syscall.Signal) {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// killNow kills the process with SIGKILL and waits for it.
func (p *proc) killNow() {
	p.kill(syscall.SIGKILL)
	<-p.done
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// waitHTTP polls url until it answers 200 or the deadline passes.
func waitHTTP(t testing.TB, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v (last error %v)", url, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stack is Envoy + routers + engines on loopback.
type stack struct {
	t       testing.TB
	dir     string
	url     string // Envoy's listener, http://127.0.0.1:port
	admin   string // Envoy admin
	engines []*engineProc
	routers []*routerProc
	envoy   *proc
}

// startEnvoy writes the rendered configuration cfg into the stack's
// directory, starts Envoy on it (listener and admin on the ports given) and
// waits until its admin says ready.
func (s *stack) startEnvoy(t testing.TB, cfg string, listen, admin int) {
	t.Helper()
	envoyCfg := filepath.Join(s.dir, "envoy.yaml")
	if err := os.WriteFile(envoyCfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.envoy = startProc(t, s.dir, "envoy", envoyBin, "-c", envoyCfg, "--log-level", "warn",
		"--base-id", fmt.Sprint(listen), "--disable-hot-restart")
	s.url = fmt.Sprintf("http://127.0.0.1:%d", listen)
	s.admin = fmt.Sprintf("http://127.0.0.1:%d", admin)
	waitHTTP(t, s.admin+"/ready", 30*time.Second)
}

type engineProc struct {
	*proc
	addr string
}

type routerProc struct {
	*proc
	grpc, admin string
	health      string // the gRPC health address, when it has one of its own
}

type stackOptions struct {
	engines, routers int
	policy           string // default dualmap
	timeScale        float64
	extraConfig      string // appended to the router config
	maxBodyBytes     int
	redis            string // Redis address: the routers share state through it
	envoyConfig      string // the file in envoy/ (default front-proxy.yaml)
	mode             string // routing.mode (default the router's)
	// pools, when set, is the router config's pools block for the
	// engines' addresses (default one pool of all of them).
	pools func(engines []string) string
	// beforeRouters runs once the engines are up, before the routers start.
	beforeRouters func(engines []string)
	// renderEnvoy rewrites the rendered Envoy config further.
	renderEnvoy func(string) string
	// engineArgs, when set, is the command line of engine i on port
	// (instead of `dualmap engine`): real engines (llama_test.go).
	engineArgs func(i, port int) []string
	poolConfig string // lines appended to the pool's YAML (4-space indent)
}

func startStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	if o.engines == 0 {
		o.engines = 4
	}
	if o.routers == 0 {
		o.routers = 1
	}
	if o.policy == "" {
		o.policy = "dualmap"
	}
	if o.timeScale == 0 {
		o.timeScale = 50
	}
	s := &stack{t: t, dir: t.TempDir()}
	var enginePorts []int
	for i := 0; i < o.engines; i++ {
		port := freePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		args := []string{dualmapBin, "engine", "--listen", addr,
			"--time-scale", fmt.Sprint(o.timeScale), "--name", addr, "--block-size", "16"}
		if o.engineArgs != nil {
			args = o.engineArgs(i, port)
		}
		p := startProc(t, s.dir, fmt.Sprintf("engine-%d", i), args...)
		s.engines = append(s.engines, &engineProc{proc: p, addr: addr})
		enginePorts = append(enginePorts, port)
	}
	for _, e := range s.engines {
		waitHTTP(t, "http://"+e.addr+"/health", 60*time.Second)
	}
	var cfg strings.Builder
	var addrs []string
	for _, e := range s.engines {
		addrs = append(addrs, e.addr)
	}
	if o.beforeRouters != nil {
		o.beforeRouters(addrs)
	}
	if o.pools != nil {
		cfg.WriteString(o.pools(addrs))
	} else {
		fmt.Fprintf(&cfg, "pools:\n  - block_size: 16\n    policy: {name: %s}\n    instances:\n", o.policy)
		for _, e := range s.engines {
			fmt.Fprintf(&cfg, "      - address: %s\n", e.addr)
		}
	}
	cfg.WriteString(o.poolConfig)
	routing := "debug_headers: true"
	if o.mode != "" {
		routing += ", mode: " + o.mode
	}
	fmt.Fprintf(&cfg, "routing: {%s}\nhealth: {interval: 200ms, timeout: 500ms, backoff: 1s}\n", routing)
	if o.maxBodyBytes > 0 {
		fmt.Fprintf(&cfg, "limits: {max_body_bytes: %d}\n", o.maxBodyBytes)
	}
	if o.redis != "" {
		fmt.Fprintf(&cfg, "state:\n  backend: redis\n  redis: {addrs: [%q]}\n", o.redis)
	}
	cfg.WriteString(o.extraConfig)
	var routerPorts []int
	for i := 0; i < o.routers; i++ {
		g, a := freePort(t), freePort(t)
		path := filepath.Join(s.dir, fmt.Sprintf("router-%d.yaml", i))
		full := fmt.Sprintf("listen: {grpc: \"127.0.0.1:%d\", admin: \"127.0.0.1:%d\"}\n%s", g, a, cfg.String())
		if err := os.WriteFile(path, []byte(full), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, s.dir, fmt.Sprintf("router-%d", i), dualmapBin, "serve", "--config", path, "--shutdown-grace", "2s")
		s.routers = append(s.routers, &routerProc{proc: p, grpc: fmt.Sprintf("127.0.0.1:%d", g), admin: fmt.Sprintf("127.0.0.1:%d", a)})
		routerPorts = append(routerPorts, g)
	}
	for _, r := range s.routers {
		waitHTTP(t, "http://"+r.admin+"/readyz", 20*time.Second)
	}
	listen, admin := freePort(t), freePort(t)
	if o.envoyConfig == "" {
		o.envoyConfig = "front-proxy.yaml"
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "envoy", o.envoyConfig))
	if err != nil {
		t.Fatal(err)
	}
	rendered := renderFrontProxy(string(src), listen, admin, routerPorts, enginePorts)
	if o.renderEnvoy != nil {
		rendered = o.renderEnvoy(rendered)
	}
	s.startEnvoy(t, rendered, listen, admin)
	return s
}

var (
	portRe     = regexp.MustCompile(`port_value: (\d+)`)
	endpointRe = regexp.MustCompile(`(?m)^(\s*)- endpoint: \{address: \{socket_address: \{address: 127\.0\.0\.1, port_value: (\d+)\}\}\}\n`)
)

// renderFrontProxy rewrites envoy/front-proxy.yaml's fixed ports (listener
// 8080, admin 9901, router 9002, model servers 8001-8004) to the test's.
func renderFrontProxy(src string, listen, admin int, routers, engines []int) string {
	out := endpointRe.ReplaceAllStringFunc(src, func(line string) string {
		m := endpointRe.FindStringSubmatch(line)
		indent, port := m[1], m[2]
		var ports []int
		switch {
		case port == "9002":
			ports = routers
		case port == "8001":
			ports = engines
		case port == "8002" || port == "8003" || port == "8004": // replaced together with 8001
			return ""
		default: // another cluster's endpoint (the xDS server's): kept
			return line
		}
		var b strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&b, "%s- endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}\n", indent, p)
		}
		return b.String()
	})
	return portRe.ReplaceAllStringFunc(out, func(s string) string {
		switch s {
		case "port_value: 8080":
			return fmt.Sprintf("port_value: %d", listen)
		case "port_value: 9901":
			return fmt.Sprintf("port_value: %d", admin)
		}
		return s
	})
}

// stop ends the stack's processes now (cleanup would do it at the end of
// the test): for tests that start several stacks in turn.
func (s *stack) stop() {
	s.envoy.kill(syscall.SIGTERM)
	<-s.envoy.done
	for _, r := range s.routers {
		r.kill(syscall.SIGTERM)
		<-r.done
	}
	for _, e := range s.engines {
		e.kill(syscall.SIGTERM)
		<-e.done
	}
}

// redisProc is a real redis-server on a free port that tests can kill and
// restart on the same port.
type redisProc struct {
	t    testing.TB
	dir  string
	addr string
	port int
	p    *proc
}

func startRedis(t testing.TB, dir string) *redisProc {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (apt-get install -y redis-server): %v", err)
	}
	r := &redisProc{t: t, dir: dir, port: freePort(t)}
	r.addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.start()
	return r
}

func (r *redisProc) start() {
	r.p = startProc(r.t, r.dir, fmt.Sprintf("redis-%d", time.Now().UnixNano()), "redis-server",
		"--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	waitListening(r.t, r.addr, "redis-server", r.p, faultWait)
}

// waitListening waits until addr accepts TCP connections, at most d.
func waitListening(t testing.TB, addr, name string, p *proc, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not accepting connections after %v (%v)\n%s", name, addr, d, err, tail(p.log, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
