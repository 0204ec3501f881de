package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

const minimal = `
pools:
  - instances:
      - address: 10.0.0.1:8000
`

func TestParseMinimalGetsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools[0]
	if c.Listen.GRPC != ":9002" || c.Listen.Admin != ":9090" || p.Name != "default" || p.Models[0] != "*" ||
		p.BlockSize != 16 || p.Policy.Name != "dualmap" || c.SLO.Default != 5*time.Second || c.Routing.Mode != ModeOverrideHost {
		t.Errorf("Parse(minimal) = %+v, want defaults", c)
	}
}

func TestSchedulerSettingsDefaultToTheSchedulers(t *testing.T) {
	c, err := Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, want := c.SchedulerConfig(c.Pools[0]), scheduler.DefaultConfig()
	if got.Policy != want.Policy || got.SLO != want.SLO || got.Candidates != want.Candidates ||
		got.CacheTokens != want.CacheTokens || got.Cost.PerToken != want.Cost.PerToken ||
		got.Queue.Order != want.Queue.Order || got.Queue.Late != want.Queue.Late || got.Queue.IdleRunning != want.Queue.IdleRunning {
		t.Errorf("SchedulerConfig(defaults) = %+v, want the scheduler's defaults %+v", got, want)
	}
}

func TestLimitsReachTheScheduler(t *testing.T) {
	c, err := Parse([]byte(minimal+"limits: {queue_order: cache, late_requests: reject, late_idle_running: 4, max_running: 256}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	q := c.SchedulerConfig(c.Pools[0]).Queue
	if q.Order != "cache" || q.Late != "reject" || q.IdleRunning != 4 || q.MaxRunning != 256 || q.Budget != 20480 {
		t.Errorf("scheduler queue config = %+v, want order cache, late reject, idle running 4, max running 256, budget 20480", q)
	}
}

func TestExampleFileIsValid(t *testing.T) {
	c, err := Load(filepath.Join("..", "examples", "dualmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pools[0].Instances) != 4 || c.SLO.Classes["interactive"] != 2*time.Second {
		t.Errorf("Load(example) = %+v", c)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    tokeniser: x\n", "tokeniser"},
		{"unknown top key", "poolz: []\n", "poolz"},
		{"wrong type", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    block_size: big\n", "block_size"},
		{"no pools", "listen: {grpc: ':1'}\n", "pools: at least one pool"},
		{"no instances", "pools:\n  - name: a\n", "pools[0]: give instances or dns"},
		{"hostname", "pools:\n  - instances: [{address: vllm:8000}]\n", "pools[0].instances[0].address"},
		{"duplicate address", "pools:\n  - instances: [{address: 10.0.0.1:80}, {address: 10.0.0.1:80}]\n", "duplicate address"},
		{"bad port", "pools:\n  - instances: [{address: '10.0.0.1:99999'}]\n", "bad port"},
		{"unknown policy", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    policy: {name: fastest}\n", `pools[0].policy: unknown policy "fastest"`},
		{"bad param", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    policy: {name: dualmap, params: {headroom: -1}}\n", "headroom"},
		{"dup model", "pools:\n  - {name: a, models: [m], instances: [{address: 10.0.0.1:80}]}\n  - {name: b, models: [m], instances: [{address: 10.0.0.2:80}]}\n", "also served by pool"},
		{"dup pool", "pools:\n  - {name: a, models: [x], instances: [{address: 10.0.0.1:80}]}\n  - {name: a, models: [y], instances: [{address: 10.0.0.2:80}]}\n", "duplicate pool name"},
		{"mode", minimal + "routing: {mode: magic}\n", "routing.mode"},
		{"header", minimal + "routing: {header: 'X-Upper'}\n", "routing.header"},
		{"backend", minimal + "state: {backend: etcd}\n", "state.backend"},
		{"redis without addrs", minimal + "state: {backend: redis}\n", "state.redis.addrs"},
		{"dns port", "pools:\n  - dns: {name: vllm.svc, port: 0}\n", "pools[0].dns.port"},
		{"missing tokenizer", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    tokenizer: /nonexistent/tok.json\n", "pools[0].tokenizer"},
		{"log level", minimal + "log: {level: loud}\n", "log.level"},
		{"queue order", minimal + "limits: {queue_order: fifo}\n", "limits.queue_order"},
		{"late requests", minimal + "limits: {late_requests: drop}\n", "limits.late_requests"},
		{"max running", minimal + "limits: {max_running: -1}\n", "limits.max_running"},
		{"not yaml", "pools: [\n", "pools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{"DUALMAP_LISTEN_GRPC": "127.0.0.1:7000", "DUALMAP_LOG_LEVEL": "debug"}
	c, err := Parse([]byte(minimal), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen.GRPC != "127.0.0.1:7000" || c.Log.Level != "debug" {
		t.Errorf("env overrides not applied: %+v", c)
	}
}

func TestSLOFor(t *testing.T) {
	c, err := Parse([]byte(minimal+"slo: {default: 4s, classes: {fast: 1s}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 4 * time.Second, false},
		{"fast", time.Second, false},
		{"750ms", 750 * time.Millisecond, false},
		{"slow", 0, true},
		{"-1s", 0, true},
	}
	for _, tt := range tests {
		got, err := c.SLOFor(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("SLOFor(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestDefaultsRoundTrip(t *testing.T) {
	out, err := DefaultsYAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(out, nil); err != nil {
		t.Errorf("Parse(DefaultsYAML()) error = %v\n%s", err, out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
