package scheduler

import (
	"fmt"
	"maps"
	"math"
	"reflect"
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
	held      string  // QueueConfig.Held
}

// cached is how many of r's tokens member i holds, or will hold when r
// is served there: with held requests counted (held.go), the longer of its
// cached prefix and the prefix of a request held in its router queue.
func (v *view) cached(i int32, r *Request) int {
	if v.held == HeldOff {
		return v.members[i].cachedTokens(r, v.blockSize)
	}
	return v.members[i].lookupTokens(r, v.blockSize)
}

// ttft is the estimated TTFT in seconds of r on member i, given i holds
// cached of its tokens as cached returned it: unless under HeldEstimate,
// the estimate counts held blocks as uncached.
func (v *view) ttft(i int32, r *Request, cached int) float64 {
	return v.members[i].ttft(v.uncachedFor(i, r, cached))
}

// uncachedFor is the uncached tokens of r that ttft prices on member i
// with cached of them held there.
func (v *view) uncachedFor(i int32, r *Request, cached int) int {
	if v.held == HeldOn || v.held == HeldSplit {
		cached = min(cached, v.members[i].cachedTokens(r, v.blockSize))
	}
	return r.Tokens - cached
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

// configurable is a policy that is also its own parameters: a pointer to a
// struct whose exported fields, each tagged `param:"key"` with the key users
// write, are the parameters, and whose unexported fields are its working
// state. Validate checks the parameters; its errors begin with the key.
type configurable interface {
	policy
	Validate() error
}

// constructor returns a new policy with every parameter at its default: the
// one place a policy writes its defaults.
type constructor func() configurable

// registry maps policy names to constructors. Each policy file adds itself in
// an init function; names are fixed at build time.
var registry = map[string]constructor{}

// register adds a policy. It panics (at init, so in every test) on a second
// use of a name or on parameters decodeParams cannot set.
func register(name string, c constructor) {
	if _, dup := registry[name]; dup {
		panic("scheduler: policy registered twice: " + name)
	}
	if _, err := paramFields(reflect.TypeOf(c())); err != nil {
		panic("scheduler: policy " + name + ": " + err.Error())
	}
	registry[name] = c
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

// PolicyDefaults returns the named policy's parameters at their defaults
// (float64, string, bool or uint64 values, keyed as users write them). New
// accepts them as they are.
func PolicyDefaults(name string) (Params, error) {
	c, ok := registry[name]
	if !ok {
		return nil, unknownPolicy(name)
	}
	return paramValues(c()), nil
}

// paramValues returns pol's parameters as they are set.
func paramValues(pol configurable) Params {
	fields, _ := paramFields(reflect.TypeOf(pol)) // checked by register
	v := reflect.ValueOf(pol).Elem()
	p := make(Params, len(fields))
	for _, f := range fields {
		p[f.key] = v.Field(f.index).Interface()
	}
	return p
}

func unknownPolicy(name string) error {
	return fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Policies(), ", "))
}

// newPolicy builds the named policy: its defaults, overwritten by p, then
// validated. It is the only place parameters are decoded; pick reads the
// typed fields.
func newPolicy(name string, p Params) (policy, error) {
	c, ok := registry[name]
	if !ok {
		return nil, unknownPolicy(name)
	}
	pol := c()
	if err := decodeParams(pol, p); err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	if err := pol.Validate(); err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return pol, nil
}

// Params are a policy's parameters as decoded from configuration: values
// are numbers, strings or booleans (numbers and booleans may also be given
// as strings).
type Params map[string]any

// paramField is one parameter of a policy struct.
type paramField struct {
	key   string
	index int // in the struct's fields
}

// paramFields lists the parameters of t, a pointer to a policy struct: its
// exported fields, which must carry a param tag and be float64, string, bool
// or uint64.
func paramFields(t reflect.Type) ([]paramField, error) {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%v is not a pointer to a struct", t)
	}
	t = t.Elem()
	var fields []paramField
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		key := sf.Tag.Get("param")
		if key == "" {
			return nil, fmt.Errorf("field %s has no param tag", sf.Name)
		}
		if slices.ContainsFunc(fields, func(f paramField) bool { return f.key == key }) {
			return nil, fmt.Errorf("parameter %s: two fields", key)
		}
		switch sf.Type.Kind() {
		case reflect.Float64, reflect.String, reflect.Bool, reflect.Uint64:
		default:
			return nil, fmt.Errorf("parameter %s: unsupported type %v", key, sf.Type)
		}
		fields = append(fields, paramField{key: key, index: i})
	}
	return fields, nil
}

// decodeParams sets the parameter fields of pol from p, rejecting keys pol
// does not have and values of the wrong type. Ranges and allowed values are
// pol.Validate's job.
func decodeParams(pol configurable, p Params) error {
	fields, err := paramFields(reflect.TypeOf(pol))
	if err != nil {
		return err
	}
	v := reflect.ValueOf(pol).Elem()
	for _, k := range slices.Sorted(maps.Keys(p)) { // the first unknown key, every time
		i := slices.IndexFunc(fields, func(f paramField) bool { return f.key == k })
		if i < 0 {
			known := make([]string, len(fields))
			for j, f := range fields {
				known[j] = f.key
			}
			slices.Sort(known)
			if len(known) == 0 {
				known = []string{"none"}
			}
			return fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if err := setParam(v.Field(fields[i].index), k, p[k]); err != nil {
			return err
		}
	}
	return nil
}

// setParam stores x, the value given for key, in field f.
func setParam(f reflect.Value, key string, x any) error {
	switch f.Kind() {
	case reflect.Float64:
		n, err := toFloat(key, x)
		if err != nil {
			return err
		}
		f.SetFloat(n)
	case reflect.Uint64:
		n, err := toUint(key, x)
		if err != nil {
			return err
		}
		f.SetUint(n)
	case reflect.Bool:
		b, err := toBool(key, x)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("%s: want a string, got %T", key, x)
		}
		f.SetString(s)
	}
	return nil
}

// toFloat reads a number: any Go number, or a string holding one.
func toFloat(key string, x any) (float64, error) {
	if s, ok := x.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", key, s)
		}
		return f, nil
	}
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Float32, reflect.Float64:
		return v.Float(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(v.Uint()), nil
	}
	return 0, fmt.Errorf("%s: want a number, got %T", key, x)
}

// toUint reads a whole number >= 0: any Go number or a string holding one
// (1e3 and 7.0 included).
func toUint(key string, x any) (uint64, error) {
	if s, ok := x.(string); ok {
		if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err == nil {
			return n, nil
		}
	}
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() >= 0 {
			return uint64(v.Int()), nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint(), nil
	}
	f, err := toFloat(key, x)
	if err != nil {
		return 0, err
	}
	if !(f >= 0 && f < 1<<64) || f != math.Trunc(f) {
		return 0, fmt.Errorf("%s: %v is not a whole number >= 0", key, x)
	}
	return uint64(f), nil
}

// toBool reads a boolean, or a string strconv.ParseBool accepts.
func toBool(key string, x any) (bool, error) {
	switch v := x.(type) {
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, fmt.Errorf("%s: %q is not a boolean", key, v)
		}
		return b, nil
	}
	return false, fmt.Errorf("%s: want a boolean, got %T", key, x)
}

// inRange is Validate's check of a number parameter (NaN is outside).
func inRange(key string, f, lo, hi float64) error {
	if f >= lo && f <= hi {
		return nil
	}
	return fmt.Errorf("%s: %g is outside [%g, %g]", key, f, lo, hi)
}

// oneOf is Validate's check of a parameter with a fixed set of values.
func oneOf(key, s string, allowed ...string) error {
	if slices.Contains(allowed, s) {
		return nil
	}
	return fmt.Errorf("%s: %q is not one of %s", key, s, strings.Join(allowed, "|"))
}
