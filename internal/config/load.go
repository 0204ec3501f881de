package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/dualmap/dualmap/internal/chattmpl"
	"github.com/dualmap/dualmap/scheduler"
)

// ErrInvalid wraps every validation error.
var ErrInvalid = errors.New("config: invalid")

// Parse decodes YAML strictly (unknown keys and type mismatches are errors
// that name the line and key), applies environment overrides, fills in
// defaults and validates.
func Parse(data []byte, env func(string) string) (Config, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalid, yaml.FormatError(err, false, true))
	}
	if err := applyEnv(&c, env); err != nil {
		return Config{}, err
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Load reads and parses a file, with overrides from the process environment.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, os.Getenv)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// applyEnv applies the environment overrides, after the file and before
// defaults.
func applyEnv(c *Config, env func(string) string) error {
	if env == nil {
		return nil
	}
	set := func(key string, dst *string) {
		if v := env(key); v != "" {
			*dst = v
		}
	}
	set("DUALMAP_LISTEN_GRPC", &c.Listen.GRPC)
	set("DUALMAP_LISTEN_ADMIN", &c.Listen.Admin)
	set("DUALMAP_LOG_LEVEL", &c.Log.Level)
	set("DUALMAP_STATE_BACKEND", &c.State.Backend)
	return nil
}

func invalid(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, path, fmt.Sprintf(format, args...))
}

// Validate reports the first invalid field, by its YAML path. It expects
// defaults to be filled in (WithDefaults).
func (c Config) Validate() error {
	if err := validAddr("listen.grpc", c.Listen.GRPC); err != nil {
		return err
	}
	if err := validAddr("listen.admin", c.Listen.Admin); err != nil {
		return err
	}
	if err := c.validGRPC(); err != nil {
		return err
	}
	if err := c.validSecrets(); err != nil {
		return err
	}
	if err := c.Tracing.validate(); err != nil {
		return err
	}
	if len(c.Pools) == 0 {
		return invalid("pools", "at least one pool is required")
	}
	names := map[string]bool{}
	models := map[string]string{}
	for i, p := range c.Pools {
		at := fmt.Sprintf("pools[%d]", i)
		if names[p.Name] {
			return invalid(at+".name", "duplicate pool name %q", p.Name)
		}
		names[p.Name] = true
		for j, m := range p.Models {
			if m == "" {
				return invalid(fmt.Sprintf("%s.models[%d]", at, j), "empty model name")
			}
			if other, dup := models[m]; dup {
				return invalid(fmt.Sprintf("%s.models[%d]", at, j), "model %q is also served by pool %q", m, other)
			}
			models[m] = p.Name
		}
		if len(p.Instances) == 0 && p.DNS == nil && p.XDS == nil {
			return invalid(at, "give instances, dns or xds")
		}
		if p.XDS != nil {
			if err := p.XDS.validate(at + ".xds"); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		for j, in := range p.Instances {
			ip := fmt.Sprintf("%s.instances[%d]", at, j)
			if err := validEndpoint(ip+".address", in.Address); err != nil {
				return err
			}
			if seen[in.Address] {
				return invalid(ip+".address", "duplicate address %q", in.Address)
			}
			seen[in.Address] = true
			if !(in.Weight >= 0) || math.IsInf(in.Weight, 1) { // as scheduler.Instance
				return invalid(ip+".weight", "must be a finite number >= 0, got %g", in.Weight)
			}
			if in.CacheTokens < 0 {
				return invalid(ip+".cache_tokens", "must be >= 0, got %d", in.CacheTokens)
			}
		}
		if err := c.validPD(at, p); err != nil {
			return err
		}
		if d := p.DNS; d != nil {
			switch {
			case d.Name == "":
				return invalid(at+".dns.name", "required")
			case d.Port < 1 || d.Port > 65535:
				return invalid(at+".dns.port", "must be in [1, 65535], got %d", d.Port)
			case d.Interval < time.Second:
				return invalid(at+".dns.interval", "must be >= 1s, got %v", d.Interval)
			}
		}
		if p.Metrics.Interval < 100*time.Millisecond || !strings.HasPrefix(p.Metrics.Path, "/") {
			return invalid(at+".metrics", "interval must be >= 100ms and path start with /, got %v %q", p.Metrics.Interval, p.Metrics.Path)
		}
		if p.KVEvents.Enabled {
			if err := p.KVEventsConfig().Validate(); err != nil {
				return invalid(at+".kv_events", "%v", err)
			}
		}
		if p.Tokenizer != "" {
			if _, err := os.Stat(p.Tokenizer); err != nil {
				return invalid(at+".tokenizer", "%v", err)
			}
		}
		if err := chattmpl.CheckSetting(p.ChatTemplate); err != nil {
			return invalid(at+".chat_template", "%v", err)
		}
		switch p.ChatTemplate {
		case "", chattmpl.SettingAuto, chattmpl.SettingBuiltin:
		default:
			if _, err := os.Stat(p.ChatTemplate); err != nil {
				return invalid(at+".chat_template", "want auto, builtin or a readable file: %v", err)
			}
		}
		if err := c.validScheduler(at, p); err != nil {
			return err
		}
	}
	for name, p := range c.Objectives {
		if name == "" || len(name) > MaxObjectiveName {
			return invalid("objectives."+name, "want a name of 1 to %d bytes", MaxObjectiveName)
		}
		if p < -MaxPriority || p > MaxPriority {
			return invalid("objectives."+name, "priority must be in [-%d, %d], got %d", MaxPriority, MaxPriority, p)
		}
	}
	for name, d := range c.SLO.Classes {
		if name == "" || d <= 0 {
			return invalid("slo.classes."+name, "want a name and a positive duration, got %v", d)
		}
	}
	switch {
	case c.Limits.MaxBodyBytes < 1:
		return invalid("limits.max_body_bytes", "must be >= 1, got %d", c.Limits.MaxBodyBytes)
	case c.Limits.MaxStreams < 1:
		return invalid("limits.max_streams", "must be >= 1, got %d", c.Limits.MaxStreams)
	case c.Limits.MaxBufferedBytes < c.Limits.MaxBodyBytes:
		return invalid("limits.max_buffered_bytes", "must be >= limits.max_body_bytes (%d), got %d", c.Limits.MaxBodyBytes, c.Limits.MaxBufferedBytes)
	case c.Limits.MaxBufferedBytesPerClient >= 0 && c.Limits.MaxBufferedBytesPerClient < c.Limits.MaxBodyBytes:
		return invalid("limits.max_buffered_bytes_per_client", "must be >= limits.max_body_bytes (%d), or negative for no bound, got %d", c.Limits.MaxBodyBytes, c.Limits.MaxBufferedBytesPerClient)
	case c.Limits.MaxBufferedBytesPerClient > c.Limits.MaxBufferedBytes:
		return invalid("limits.max_buffered_bytes_per_client", "must be <= limits.max_buffered_bytes (%d), got %d", c.Limits.MaxBufferedBytes, c.Limits.MaxBufferedBytesPerClient)
	case c.Routing.Mode != ModeOverrideHost && c.Routing.Mode != ModeOriginalDst:
		return invalid("routing.mode", "%q is not %s or %s", c.Routing.Mode, ModeOverrideHost, ModeOriginalDst)
	case c.Routing.ResponseBody != "streamed" && c.Routing.ResponseBody != "none":
		return invalid("routing.response_body", "%q is not streamed or none", c.Routing.ResponseBody)
	case !validHeaderName(c.Routing.Header):
		return invalid("routing.header", "%q is not a lowercase header name", c.Routing.Header)
	case !validHeaderName(c.Routing.SLOHeader):
		return invalid("routing.slo_header", "%q is not a lowercase header name", c.Routing.SLOHeader)
	case c.Routing.SessionHeader != "" && !validHeaderName(c.Routing.SessionHeader):
		return invalid("routing.session_header", "%q is not a lowercase header name", c.Routing.SessionHeader)
	case !validHeaderName(c.Routing.PriorityHeader):
		return invalid("routing.priority_header", "%q is not a lowercase header name", c.Routing.PriorityHeader)
	case !strings.HasPrefix(c.Health.Path, "/"):
		return invalid("health.path", "must start with /, got %q", c.Health.Path)
	case c.Health.Interval <= 0 || c.Health.Timeout <= 0 || c.Health.Backoff <= 0 || c.Health.MaxBackoff < c.Health.Backoff:
		return invalid("health", "interval, timeout and backoff must be > 0 and max_backoff >= backoff")
	case c.Health.Consecutive5xx < 1 || c.Health.Consecutive5xx > 1000:
		return invalid("health.consecutive_5xx", "must be in [1, 1000], got %d", c.Health.Consecutive5xx)
	case c.State.Backend != "memory" && c.State.Backend != "redis":
		return invalid("state.backend", "%q is not memory or redis", c.State.Backend)
	case c.State.Backend == "redis" && len(c.State.Redis.Addrs) == 0:
		return invalid("state.redis.addrs", "at least one address is required with backend redis")
	case c.State.Redis.Heartbeat < 10*time.Millisecond:
		return invalid("state.redis.heartbeat", "must be >= 10ms, got %v", c.State.Redis.Heartbeat)
	case !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level):
		return invalid("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	case c.Log.Format != "text" && c.Log.Format != "json":
		return invalid("log.format", "%q is not text or json", c.Log.Format)
	}
	return nil
}

func (c Config) validGRPC() error {
	g := c.GRPC
	switch {
	case g.MaxConcurrentStreams < 1:
		return invalid("grpc.max_concurrent_streams", "must be >= 1, got %d", g.MaxConcurrentStreams)
	case g.KeepaliveTime < time.Second:
		return invalid("grpc.keepalive_time", "must be >= 1s, got %v", g.KeepaliveTime)
	case g.KeepaliveTimeout < 0:
		return invalid("grpc.keepalive_timeout", "must be > 0, got %v", g.KeepaliveTimeout)
	case g.MinPingInterval < 0:
		return invalid("grpc.min_ping_interval", "must be > 0, got %v", g.MinPingInterval)
	case g.MaxConnectionAge > 0 && g.MaxConnectionAge < time.Minute:
		return invalid("grpc.max_connection_age", "must be >= 1m (or negative: never), got %v", g.MaxConnectionAge)
	case g.MaxConnectionAgeGrace < 0:
		return invalid("grpc.max_connection_age_grace", "must be > 0, got %v", g.MaxConnectionAgeGrace)
	case g.Health.MaxWatchStreams < 1:
		return invalid("grpc.health.max_watch_streams", "must be >= 1, got %d", g.Health.MaxWatchStreams)
	}
	if g.Health.Enabled {
		if err := validAddr("grpc.health.listen", g.Health.Listen); err != nil {
			return err
		}
		for _, other := range []struct{ key, addr string }{{"listen.grpc", c.Listen.GRPC}, {"listen.admin", c.Listen.Admin}} {
			if samePort(g.Health.Listen, other.addr) {
				return invalid("grpc.health.listen", "%q is also %s (%q)", g.Health.Listen, other.key, other.addr)
			}
		}
	} else if g.Health.Listen != "" {
		return invalid("grpc.health.listen", "set, but grpc.health.enabled is false")
	}
	return c.validTLS()
}

// SchedulerConfig is the scheduler configuration of pool p: every key of
// SchedulerSettings the file has, and the policy's parameters.
func (c Config) SchedulerConfig(p Pool) scheduler.Config {
	var s scheduler.Config
	for _, st := range schedulerSettings {
		if st.YAML != "" {
			st.setFromYAML(&s, c, p)
		}
	}
	s.Queue.Adaptive = c.Limits.QueueBudgetTokens == 0 // the file's default: the adaptive rule
	s.Params = p.Policy.Params
	return s
}

// validScheduler checks what pool p, at YAML path at, hands to its
// scheduler with the scheduler's own validation: each key alone (every
// other field zero, which means its default), then each policy parameter
// alone with the policy's name, so that an error names the key the user
// wrote; then the whole, for what only a combination can get wrong.
func (c Config) validScheduler(at string, p Pool) error {
	for _, st := range schedulerSettings {
		if st.YAML == "" {
			continue
		}
		var s scheduler.Config
		st.setFromYAML(&s, c, p)
		if err := s.Validate(); err != nil {
			return invalid(strings.Replace(st.YAML, "pools[]", at, 1), "%v", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Policy.Params)) {
		s := scheduler.Config{Policy: p.Policy.Name, Params: scheduler.Params{name: p.Policy.Params[name]}}
		if err := s.Validate(); err != nil {
			return invalid(at+".policy.params."+name, "%v", err)
		}
	}
	if err := c.SchedulerConfig(p).Validate(); err != nil {
		return invalid(at, "%v", err)
	}
	return nil
}

// Bounds of the request controls.
const (
	MaxObjectiveName = 253       // bytes of an objective's name
	MaxPriority      = 1 << 30   // |priority| of an objective
	MaxTTFTMillis    = 3_600_000 // x-llm-d-slo-ttft-ms: one hour
	ttftHeaderName   = "x-llm-d-slo-ttft-ms"
)

// PriorityOf returns the priority of the inference objective named
// (0 for none or one not configured).
func (c Config) PriorityOf(objective string) int { return c.Objectives[objective] }

// TTFTMillis parses the x-llm-d-slo-ttft-ms header: a whole number of
// milliseconds in [1, MaxTTFTMillis].
func TTFTMillis(v string) (time.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxTTFTMillis {
		return 0, fmt.Errorf("%s: %q is not a whole number of milliseconds in [1, %d]", ttftHeaderName, v, MaxTTFTMillis)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// SLOFor resolves an SLO header value: a class name or a Go duration
// ("2s", "750ms"). Empty means the default.
func (c Config) SLOFor(v string) (time.Duration, error) {
	if v == "" {
		return c.SLO.Default, nil
	}
	if d, ok := c.SLO.Classes[v]; ok {
		return d, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("unknown SLO class or duration %q", v)
	}
	return d, nil
}

// samePort reports whether two listen addresses would collide: the same
// non-zero port on the same host, or on any host when one is a wildcard.
func samePort(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

func validAddr(path, a string) error {
	if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
		return invalid(path, "%q is not host:port", a)
	}
	return nil
}

// validEndpoint accepts what Envoy accepts as an endpoint in the header:
// IP:port or [IPv6]:port.
func validEndpoint(path, a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return invalid(path, "%q is not IP:port", a)
	}
	if net.ParseIP(host) == nil {
		return invalid(path, "%q: %q is not an IP address (Envoy pins endpoints by IP; use dns for names)", a, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return invalid(path, "%q: bad port", a)
	}
	return nil
}

// ValidHeaderName reports whether h is a lowercase HTTP header name.
func ValidHeaderName(h string) bool { return validHeaderName(h) }

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
