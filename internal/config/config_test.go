package config

import (
	"errors"
	"fmt"
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
	if c.Listen.GRPC != "127.0.0.1:9002" || c.Listen.Admin != "127.0.0.1:9090" || p.Name != "default" || p.Models[0] != "*" ||
		p.BlockSize != 16 || p.Policy.Name != "dualmap" || c.SLO.Default != 5*time.Second || c.Routing.Mode != ModeOverrideHost ||
		c.Health.Consecutive5xx != 3 {
		t.Errorf("Parse(minimal) = %+v, want defaults", c)
	}
}

// The engines' metrics are polled only where a pool says enabled: true.
func TestMetricsOffByDefault(t *testing.T) {
	for _, tt := range []struct {
		extra string
		want  bool
	}{
		{"", false},
		{"    metrics: {interval: 2s}\n", false},
		{"    metrics: {enabled: true}\n", true},
		{"    metrics: {enabled: false}\n", false},
	} {
		c, err := Parse([]byte(minimal+tt.extra), nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.extra, err)
		}
		if got := c.Pools[0].Metrics.On(); got != tt.want {
			t.Errorf("Parse(%q): metrics on = %v, want %v", tt.extra, got, tt.want)
		}
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
	if q.Order != "cache" || q.Late != "reject" || q.IdleRunning != 4 || q.MaxRunning != 256 || q.Budget != 0 || !q.Adaptive {
		t.Errorf("scheduler queue config = %+v, want order cache, late reject, idle running 4, max running 256, the adaptive rule", q)
	}
}

func TestQueueBudgetModes(t *testing.T) {
	tests := []struct {
		name     string
		limits   string
		budget   int
		adaptive bool
		share    float64
	}{
		{"default: adaptive", "", 0, true, 0.125},
		{"explicit budget", "limits: {queue_budget_tokens: 4096}\n", 4096, false, 0.125},
		{"off", "limits: {queue_budget_tokens: -1}\n", 0, false, 0.125},
		{"share", "limits: {queue_slo_share: 0.25}\n", 0, true, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(minimal+tt.limits), nil)
			if err != nil {
				t.Fatal(err)
			}
			q := c.SchedulerConfig(c.Pools[0]).Queue
			if q.Budget != tt.budget || q.Adaptive != tt.adaptive || q.SLOShare != tt.share {
				t.Errorf("queue = budget %d adaptive %v share %g, want %d %v %g", q.Budget, q.Adaptive, q.SLOShare, tt.budget, tt.adaptive, tt.share)
			}
		})
	}
}

func TestExampleFileIsValid(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "examples", "dualmap.yaml"))
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
		{"no instances", "pools:\n  - name: a\n", "pools[0]: give instances, dns or xds"},
		{"hostname", "pools:\n  - instances: [{address: vllm:8000}]\n", "pools[0].instances[0].address"},
		{"duplicate address", "pools:\n  - instances: [{address: 10.0.0.1:80}, {address: 10.0.0.1:80}]\n", "duplicate address"},
		{"bad port", "pools:\n  - instances: [{address: '10.0.0.1:99999'}]\n", "bad port"},
		{"unknown policy", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    policy: {name: fastest}\n", `pools[0].policy.name: unknown policy "fastest"`},
		{"bad param", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    policy: {name: dualmap, params: {headroom: -1}}\n", "pools[0].policy.params.headroom"},
		{"dup model", "pools:\n  - {name: a, models: [m], instances: [{address: 10.0.0.1:80}]}\n  - {name: b, models: [m], instances: [{address: 10.0.0.2:80}]}\n", "also served by pool"},
		{"dup pool", "pools:\n  - {name: a, models: [x], instances: [{address: 10.0.0.1:80}]}\n  - {name: a, models: [y], instances: [{address: 10.0.0.2:80}]}\n", "duplicate pool name"},
		{"mode", minimal + "routing: {mode: magic}\n", "routing.mode"},
		{"header", minimal + "routing: {header: 'X-Upper'}\n", "routing.header"},
		{"backend", minimal + "state: {backend: etcd}\n", "state.backend"},
		{"redis without addrs", minimal + "state: {backend: redis}\n", "state.redis.addrs"},
		{"dns port", "pools:\n  - dns: {name: vllm.svc, port: 0}\n", "pools[0].dns.port"},
		{"missing tokenizer", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    tokenizer: /nonexistent/tok.json\n", "pools[0].tokenizer"},
		{"missing chat template", "pools:\n  - instances: [{address: 10.0.0.1:80}]\n    chat_template: /nonexistent/chat.jinja\n", "pools[0].chat_template: want auto, builtin or a readable file"},
		{"log level", minimal + "log: {level: loud}\n", "log.level"},
		{"queue order", minimal + "limits: {queue_order: fifo}\n", "limits.queue_order"},
		{"late requests", minimal + "limits: {late_requests: drop}\n", "limits.late_requests"},
		{"max running", minimal + "limits: {max_running: -1}\n", "limits.max_running"},
		{"consecutive 5xx", minimal + "health: {consecutive_5xx: -1}\n", "health.consecutive_5xx"},
		{"consecutive 5xx too many", minimal + "health: {consecutive_5xx: 1001}\n", "health.consecutive_5xx"},
		{"objective priority", minimal + "objectives: {batch: 2000000000}\n", "objectives.batch"},
		{"objective not a number", minimal + "objectives: {batch: low}\n", "objectives"},
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

// TestSchedulerErrorsNameTheKey gives a bad value to every key that reaches
// a pool's scheduler (and to the instance fields that reach
// scheduler.Instance); the error must name that key, not the policy's.
func TestSchedulerErrorsNameTheKey(t *testing.T) {
	const pool = "pools:\n  - instances: [{address: 10.0.0.1:80}]\n"
	tests := []struct {
		name, yaml, key string
	}{
		{"slo", pool + "slo: {default: -1s}\n", "slo.default"},
		{"max queue wait", pool + "limits: {max_queue_wait: -1s}\n", "limits.max_queue_wait"},
		{"queue order", pool + "limits: {queue_order: fifo}\n", "limits.queue_order"},
		{"late requests", pool + "limits: {late_requests: drop}\n", "limits.late_requests"},
		{"late idle running", pool + "limits: {late_idle_running: -1}\n", "limits.late_idle_running"},
		{"max running", pool + "limits: {max_running: -1}\n", "limits.max_running"},
		{"block size", pool + "    block_size: -1\n", "pools[0].block_size"},
		{"too many candidates", pool + "    candidates: 7\n", "pools[0].candidates"},
		{"negative candidates", pool + "    candidates: -1\n", "pools[0].candidates"},
		{"cache tokens", pool + "    cache_tokens: -1\n", "pools[0].cache_tokens"},
		{"max seqs", pool + "    max_seqs: -1\n", "pools[0].max_seqs"},
		{"per token seconds", pool + "    per_token_seconds: -0.5\n", "pools[0].per_token_seconds"},
		{"per token seconds NaN", pool + "    per_token_seconds: .nan\n", "pools[0].per_token_seconds"},
		{"policy name", pool + "    policy: {name: fastest}\n", "pools[0].policy.name"},
		{"policy param", pool + "    policy: {params: {headroom: -1}}\n", "pools[0].policy.params.headroom"},
		{"policy param type", pool + "    policy: {params: {rebalance: maybe}}\n", "pools[0].policy.params.rebalance"},
		{"unknown policy param", pool + "    policy: {params: {tie: 0.2, bogus: 1}}\n", "pools[0].policy.params.bogus"},
		{"param of another policy", pool + "    policy: {name: preble, params: {exploit: 2}}\n", "pools[0].policy.params.exploit"},
		{"instance weight", "pools:\n  - instances: [{address: 10.0.0.1:80, weight: -1}]\n", "pools[0].instances[0].weight"},
		{"instance weight NaN", "pools:\n  - instances: [{address: 10.0.0.1:80, weight: .nan}]\n", "pools[0].instances[0].weight"},
		{"instance cache tokens", "pools:\n  - instances: [{address: 10.0.0.1:80, cache_tokens: -1}]\n", "pools[0].instances[0].cache_tokens"},
		{"queue slo share", pool + "limits: {queue_slo_share: 1.5}\n", "limits.queue_slo_share"},
		{"queue slo share negative", pool + "limits: {queue_slo_share: -0.1}\n", "limits.queue_slo_share"},
		{"second pool", pool + "    models: [a]\n  - {name: b, models: [b], candidates: 9, instances: [{address: 10.0.0.2:80}]}\n", "pools[1].candidates"},
	}
	covered := map[string]bool{
		// Any value is valid: a negative budget means no router queue.
		"limits.queue_budget_tokens": true,
	}
	for _, tt := range tests {
		covered[tt.key] = true
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ": "+tt.key+": ") {
				t.Errorf("Parse() error = %v, want ErrInvalid naming %q", err, tt.key)
			}
		})
	}
	for _, st := range SchedulerSettings() {
		if key := strings.Replace(st.YAML, "pools[]", "pools[0]", 1); key != "" && !covered[key] {
			t.Errorf("key %s reaches the scheduler but has no case here", key)
		}
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

func TestObjectivesAndTTFT(t *testing.T) {
	c, err := Parse([]byte(minimal+"objectives: {critical: 10, batch: -1}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"critical": 10, "batch": -1, "unknown": 0, "": 0} {
		if got := c.PriorityOf(name); got != want {
			t.Errorf("PriorityOf(%q) = %d, want %d", name, got, want)
		}
	}
	for in, want := range map[string]time.Duration{"250": 250 * time.Millisecond, " 1 ": time.Millisecond, "0": 0, "1e3": 0, "3600001": 0, "": 0} {
		got, err := TTFTMillis(in)
		if got != want || (err != nil) != (want == 0) || (err != nil && !strings.Contains(err.Error(), "x-llm-d-slo-ttft-ms")) {
			t.Errorf("TTFTMillis(%q) = %v, %v; want %v", in, got, err, want)
		}
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
	c, err := Parse(out, nil)
	if err != nil {
		t.Fatalf("Parse(DefaultsYAML()) error = %v\n%s", err, out)
	}
	// The example pool's policy lists every parameter, with its default.
	p := c.Pools[0].Policy
	def, err := scheduler.PolicyDefaults(p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Params) != len(def) {
		t.Errorf("DefaultsYAML() policy params = %v, want %v", p.Params, def)
	}
	for k, v := range def {
		if got := fmt.Sprint(p.Params[k]); got != fmt.Sprint(v) {
			t.Errorf("DefaultsYAML() policy param %s = %s, want %v", k, got, v)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
