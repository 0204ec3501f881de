package config

import (
	"errors"
	"strings"
	"testing"
)

func TestPDDefaults(t *testing.T) {
	c, err := Parse([]byte(`
pools:
  - instances:
      - {address: 10.0.0.1:8000, role: prefill}
      - {address: 10.0.0.2:8000, role: decode}
    pd: {}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Pools[0].PD
	if d == nil || d.Header != DefaultPrefillHeader || d.MinUncachedTokens != DefaultMinUncachedTokens ||
		d.DecodeHitRatio != DefaultDecodeHitRatio || d.DecodePolicy != DefaultDecodePolicy {
		t.Errorf("pd = %+v, want the defaults", d)
	}
	c, err = Parse([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pools[0].PD != nil {
		t.Errorf("pd of a pool without one = %+v, want nil", c.Pools[0].PD)
	}
}

func TestPDErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, key string
	}{
		{"unknown role", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: prefil}]
`, "pools[0].instances[0].role"},
		{"role without pd", `
pools:
  - instances: [{address: 10.0.0.1:8000}, {address: 10.0.0.2:8000, role: decode}]
`, "pools[0].instances[1].role"},
		{"dns role without pd", `
pools:
  - dns: {name: engines.local, port: 8000, role: prefill}
`, "pools[0].dns.role"},
		{"bad dns role", `
pools:
  - dns: {name: engines.local, port: 8000, role: prefiller}
    pd: {}
`, "pools[0].dns.role"},
		{"no decode instance", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: prefill}]
    pd: {}
`, "pools[0].instances"},
		{"no prefill instance", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: decode}]
    pd: {}
`, "pools[0].instances"},
		{"bad header", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {header: "X Prefill"}
`, "pools[0].pd.header"},
		{"header is the pin's", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {header: x-gateway-destination-endpoint}
`, "pools[0].pd.header"},
		{"negative threshold", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {min_uncached_tokens: -1}
`, "pools[0].pd.min_uncached_tokens"},
		{"ratio over one", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {decode_hit_ratio: 1.5}
`, "pools[0].pd.decode_hit_ratio"},
		{"unknown decode policy", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {decode_policy: fastest}
`, "pools[0].pd.decode_policy"},
		{"unknown pd key", `
pools:
  - instances: [{address: 10.0.0.1:8000, role: both}]
    pd: {treshold: 3}
`, "treshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("Parse() error = %v, want an ErrInvalid naming %s", err, tt.key)
			}
		})
	}
}

func TestPDFromDNSNeedsNoStaticHalves(t *testing.T) {
	_, err := Parse([]byte(`
pools:
  - instances: [{address: 10.0.0.1:8000, role: decode}]
    dns: {name: prefill.local, port: 8000, role: prefill}
    pd: {min_uncached_tokens: 1, decode_hit_ratio: 1}
`), nil)
	if err != nil {
		t.Errorf("Parse(decode static, prefill from dns) error = %v, want nil", err)
	}
}

func TestRoles(t *testing.T) {
	for _, tt := range []struct {
		role              string
		prefills, decodes bool
	}{{"", true, true}, {RoleBoth, true, true}, {RolePrefill, true, false}, {RoleDecode, false, true}} {
		if Prefills(tt.role) != tt.prefills || Decodes(tt.role) != tt.decodes {
			t.Errorf("Prefills(%q), Decodes(%q) = %v, %v, want %v, %v", tt.role, tt.role, Prefills(tt.role), Decodes(tt.role), tt.prefills, tt.decodes)
		}
	}
}

func TestPDLocal(t *testing.T) {
	d := PD{MinUncachedTokens: 64, DecodeHitRatio: 0.8}
	for _, tt := range []struct {
		tokens, cached int
		want           string
	}{
		{1000, 0, ""},
		{1000, 799, ""},
		{1000, 800, PDCached},
		{1000, 950, PDCached},
		{50, 0, PDShort},
		{63, 0, PDShort},
		{64, 0, ""},
		{40, 39, PDCached},
	} {
		if got := d.Local(tt.tokens, tt.cached); got != tt.want {
			t.Errorf("Local(%d, %d) = %q, want %q", tt.tokens, tt.cached, got, tt.want)
		}
	}
}
