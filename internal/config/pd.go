package config

import (
	"fmt"
	"math"
	"slices"

	"github.com/dualmap/dualmap/scheduler"
)

// Instance roles in a prefill/decode pool (Instance.Role, DNS.Role and the
// xDS endpoint metadata filter_metadata.dualmap.role).
const (
	RoleBoth    = "both"    // prefills and decodes (the default)
	RolePrefill = "prefill" // only prefills for decode instances
	RoleDecode  = "decode"  // only decodes (its own prefill when the decider says so)
)

// Defaults of a P/D pool.
const (
	// DefaultPrefillHeader is the header llm-d's decode-side P/D sidecar
	// (cmd/pd-sidecar of llm-d/llm-d-router) reads the prefill instance
	// from.
	DefaultPrefillHeader = "x-prefiller-host-port"
	// DefaultMinUncachedTokens is the shortest uncached part of a prompt
	// sent to a prefill instance; shorter ones are prefilled where they
	// decode. See docs/evaluation.md (P/D) for the measurement behind it.
	DefaultMinUncachedTokens = 64
	// DefaultDecodeHitRatio is the share of a prompt the decode instance
	// must already hold for remote prefill to be skipped.
	DefaultDecodeHitRatio = 0.8
	// DefaultDecodePolicy chooses decode instances for decode capacity.
	DefaultDecodePolicy = "decode-capacity"
)

// PD configures a prefill/decode pool. Zero values mean defaults.
type PD struct {
	// Header is the request header naming the prefill instance (IP:port)
	// for the decode side's sidecar (default x-prefiller-host-port). A
	// client's own value is always removed.
	Header string `yaml:"header"`
	// MinUncachedTokens: a request whose prompt the decode instance
	// misses by fewer tokens than this is prefilled there (default 64).
	MinUncachedTokens int `yaml:"min_uncached_tokens"`
	// DecodeHitRatio: a request whose prompt the decode instance holds
	// this share of, or more, is prefilled there (default 0.8; 1: only a
	// fully cached prompt).
	DecodeHitRatio float64 `yaml:"decode_hit_ratio"`
	// DecodePolicy is the routing policy over the decode instances
	// (default decode-capacity: running sequences, KV memory and the
	// decode step's estimate first, the cached prefix as a tie-break).
	// It runs at its default parameters; the pool's policy (dualmap by
	// default), with policy.params, chooses the prefill instance.
	DecodePolicy string `yaml:"decode_policy"`
}

func (d *PD) withDefaults() *PD {
	if d == nil {
		return nil
	}
	c := *d
	if c.Header == "" {
		c.Header = DefaultPrefillHeader
	}
	if c.MinUncachedTokens == 0 {
		c.MinUncachedTokens = DefaultMinUncachedTokens
	}
	if c.DecodeHitRatio == 0 {
		c.DecodeHitRatio = DefaultDecodeHitRatio
	}
	if c.DecodePolicy == "" {
		c.DecodePolicy = DefaultDecodePolicy
	}
	return &c
}

// The decider's reasons for a decode instance to prefill a request itself
// (PD.Local).
const (
	PDShort  = "short"         // the part it misses is under MinUncachedTokens
	PDCached = "decode_cached" // it holds DecodeHitRatio of the prompt
)

// Local is the decider's rule for a prompt of tokens of which the decode
// instance holds cached: the reason it prefills the prompt itself
// (PDCached, PDShort), or "" when a prefill instance should. The router
// (package pool) and the simulator (SimulatePD) both decide with it.
func (d PD) Local(tokens, cached int) string {
	switch {
	case cached > 0 && float64(cached) >= d.DecodeHitRatio*float64(tokens):
		return PDCached
	case tokens-cached < d.MinUncachedTokens:
		return PDShort
	}
	return ""
}

// ValidRole reports whether r is a role ("" is both).
func ValidRole(r string) bool {
	return r == "" || r == RoleBoth || r == RolePrefill || r == RoleDecode
}

// Prefills reports whether an instance of role r prefills for others.
func Prefills(r string) bool { return r != RoleDecode }

// Decodes reports whether an instance of role r can be a request's pin.
func Decodes(r string) bool { return r != RolePrefill }

// validPD checks pool p's roles and P/D settings, at YAML path at.
func (c Config) validPD(at string, p Pool) error {
	prefill, decode := 0, 0
	for j, in := range p.Instances {
		path := fmt.Sprintf("%s.instances[%d].role", at, j)
		switch {
		case !ValidRole(in.Role):
			return invalid(path, "%q is not prefill, decode or both", in.Role)
		case p.PD == nil && in.Role != "" && in.Role != RoleBoth:
			return invalid(path, "role %s needs a P/D pool: set %s.pd", in.Role, at)
		}
		if Prefills(in.Role) {
			prefill++
		}
		if Decodes(in.Role) {
			decode++
		}
	}
	if d := p.DNS; d != nil {
		switch {
		case !ValidRole(d.Role):
			return invalid(at+".dns.role", "%q is not prefill, decode or both", d.Role)
		case p.PD == nil && d.Role != "" && d.Role != RoleBoth:
			return invalid(at+".dns.role", "role %s needs a P/D pool: set %s.pd", d.Role, at)
		}
	}
	d := p.PD
	if d == nil {
		return nil
	}
	switch {
	case !validHeaderName(d.Header):
		return invalid(at+".pd.header", "%q is not a lowercase header name", d.Header)
	case d.Header == c.Routing.Header:
		return invalid(at+".pd.header", "%q is also routing.header", d.Header)
	case d.MinUncachedTokens < 0:
		return invalid(at+".pd.min_uncached_tokens", "must be >= 0, got %d", d.MinUncachedTokens)
	case !(d.DecodeHitRatio > 0 && d.DecodeHitRatio <= 1) || math.IsNaN(d.DecodeHitRatio):
		return invalid(at+".pd.decode_hit_ratio", "must be in (0, 1], got %g", d.DecodeHitRatio)
	case !slices.Contains(scheduler.Policies(), d.DecodePolicy):
		return invalid(at+".pd.decode_policy", "unknown policy %q (one of %v)", d.DecodePolicy, scheduler.Policies())
	}
	if p.DNS == nil && p.XDS == nil {
		// Static only: both halves must have someone.
		switch {
		case decode == 0:
			return invalid(at+".instances", "a P/D pool needs an instance of role decode or both")
		case prefill == 0:
			return invalid(at+".instances", "a P/D pool needs an instance of role prefill or both")
		}
	}
	return nil
}
