package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// policy chooses an instance for one request.
//
// pick runs without the Scheduler's lock, concurrently with other picks and
// with the changes to the members' load: it must not block, allocate or
// change anything reachable from v (rr and random use atomics). v's members,
// ready flags and rings are an immutable snapshot (see picker); the
// members' load figures are read through their accessors, which are safe
// for concurrent use.
// cands are r's ring candidates: distinct ready members in ring order, empty
// only when no member is ready. pick returns a ready member index.
type policy interface {
	pick(v *view, r *Request, cands []int32) (choice, error)
}

// rebalancing is implemented by policies whose requests may be migrated
// inside their candidate set by the hotspot rebalancer.
type rebalancing interface {
	rebalance() bool
}

type choice struct {
	inst     int32
	fallback int32 // -1: the scheduler takes another candidate
	reason   Reason
}

// view is what a policy may read: the members of one snapshot, indexed as
// in its members slice, and the request's clock and objective.
type view struct {
	members   []*instance
	ready     []bool
	nready    int
	rings     *ringSet
	blockSize int
	now       time.Duration
	slo       float64 // the request's TTFT objective in seconds
	window    time.Duration
}

func (v *view) cached(i int32, r *Request) int { return v.members[i].cachedTokens(r, v.blockSize) }

// ttft is the estimated TTFT in seconds of r on member i, given i holds
// cached of its tokens.
func (v *view) ttft(i int32, r *Request, cached int) float64 {
	in := v.members[i]
	return in.est.ttft(in.ahead(), r.Tokens-cached)
}

// minTTFT returns the ready member with the lowest estimated TTFT for r over
// the whole pool (cache-aware), and that estimate.
func (v *view) minTTFT(r *Request) (int32, float64) {
	best, bestT := int32(-1), math.Inf(1)
	for i := range v.members {
		if !v.ready[i] {
			continue
		}
		t := v.ttft(int32(i), r, v.cached(int32(i), r))
		if t < bestT {
			best, bestT = int32(i), t
		}
	}
	return best, bestT
}

// factory builds a policy from its parameters, rejecting unknown ones.
type factory func(p Params) (policy, error)

// registry maps policy names to factories. Each policy file adds itself in
// an init function; names are fixed at build time.
var registry = map[string]factory{}

func register(name string, f factory) {
	if _, dup := registry[name]; dup {
		panic("scheduler: policy registered twice: " + name)
	}
	registry[name] = f
}

// Policies returns the names of the routing policies, sorted.
func Policies() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func newPolicy(name string, p Params) (policy, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Policies(), ", "))
	}
	pol, err := f(p)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return pol, nil
}

// Params are a policy's parameters as decoded from configuration: values
// are numbers, strings or booleans (numbers may also be given as strings).
type Params map[string]any

// check rejects keys that are not in known.
func (p Params) check(known ...string) error {
	for k := range p {
		if !slices.Contains(known, k) {
			slices.Sort(known)
			return fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

func (p Params) float(key string, def, lo, hi float64) (float64, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, fmt.Errorf("parameter %s: %q is not a number", key, x)
		}
	default:
		return 0, fmt.Errorf("parameter %s: want a number, got %T", key, v)
	}
	if math.IsNaN(f) || f < lo || f > hi {
		return 0, fmt.Errorf("parameter %s: %g is outside [%g, %g]", key, f, lo, hi)
	}
	return f, nil
}

func (p Params) str(key, def string, allowed ...string) (string, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("parameter %s: want one of %s, got %T", key, strings.Join(allowed, "|"), v)
	}
	if !slices.Contains(allowed, s) {
		return "", fmt.Errorf("parameter %s: %q is not one of %s", key, s, strings.Join(allowed, "|"))
	}
	return s, nil
}

func (p Params) boolean(key string, def bool) (bool, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(x)
		if err != nil {
			return false, fmt.Errorf("parameter %s: %q is not a boolean", key, x)
		}
		return b, nil
	}
	return false, fmt.Errorf("parameter %s: want a boolean, got %T", key, v)
}
