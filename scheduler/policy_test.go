package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every policy's defaults are valid, and New with no parameters builds
// exactly the defaults PolicyDefaults lists.
func TestPolicyDefaults(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			def := registry[name]()
			if err := def.Validate(); err != nil {
				t.Fatalf("Validate() of the defaults = %v, want nil", err)
			}
			listed, err := PolicyDefaults(name)
			if err != nil {
				t.Fatalf("PolicyDefaults() error = %v", err)
			}
			for _, p := range []Params{nil, listed} {
				pol, err := newPolicy(name, p)
				if err != nil {
					t.Fatalf("newPolicy(%v) error = %v", p, err)
				}
				if !reflect.DeepEqual(pol, def) {
					t.Errorf("newPolicy(%v) = %+v, want the defaults %+v", p, pol, def)
				}
			}
		})
	}
	if _, err := PolicyDefaults("fastest"); err == nil || !strings.Contains(err.Error(), `unknown policy "fastest"`) {
		t.Errorf("PolicyDefaults(fastest) error = %v, want unknown policy", err)
	}
}

// TestPolicyDefaultsListed pins the keys and defaults users see (README,
// `dualmap config defaults`).
func TestPolicyDefaultsListed(t *testing.T) {
	want := map[string]Params{
		"cache-affinity":               {},
		"consistent-hash-bounded-load": {"bound": 1.25},
		"decode-capacity":              {"tie": 0.05},
		"dualmap":                      {"headroom": 2.0, "hopeless": "cache", "tie": 0.1, "overflow": "none", "choice": "slo", "rebalance": true, "home": 0.0, "reach": uint64(64)},
		"least-loaded":                 {},
		"min-ttft":                     {},
		"preble":                       {"exploit": 0.5, "imbalance": 1.5},
		"random":                       {"seed": uint64(1)},
		"round-robin":                  {},
	}
	if got := Policies(); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("Policies() = %v, want a row here for each", got)
	}
	for name, w := range want {
		if got, _ := PolicyDefaults(name); !reflect.DeepEqual(got, w) {
			t.Errorf("PolicyDefaults(%s) = %v, want %v", name, got, w)
		}
	}
}

// badParam is a value that must be refused with an error naming the key.
type badParam struct {
	policy, key string
	value       any
	want        string
}

// badParams has rows for every parameter of every policy.
var badParams = []badParam{
	{"consistent-hash-bounded-load", "bound", 0.5, "0.5 is outside [1, 100]"},
	{"consistent-hash-bounded-load", "bound", "101", "outside"},
	{"consistent-hash-bounded-load", "bound", "NaN", "outside"},
	{"consistent-hash-bounded-load", "bound", "lots", `"lots" is not a number`},
	{"decode-capacity", "tie", 1.5, "outside [0, 1]"},
	{"decode-capacity", "tie", -0.1, "outside"},
	{"dualmap", "headroom", 9.0, "9 is outside [0.01, 8]"},
	{"dualmap", "headroom", 0, "outside"},
	{"dualmap", "headroom", "inf", "outside"},
	{"dualmap", "headroom", true, "want a number, got bool"},
	{"dualmap", "hopeless", "stay", `"stay" is not one of cache|load`},
	{"dualmap", "hopeless", 1, "want a string, got int"},
	{"dualmap", "tie", 1.5, "outside [0, 1]"},
	{"dualmap", "tie", -0.1, "outside"},
	{"dualmap", "home", 101.0, "101 is outside [0, 100]"},
	{"dualmap", "home", -1.0, "outside"},
	{"dualmap", "reach", 1025, "1025 is outside [0, 1024]"},
	{"dualmap", "reach", -1, "reach"},
	{"dualmap", "overflow", "local", `"local" is not one of none|global`},
	{"dualmap", "overflow", true, "want a string"},
	{"dualmap", "choice", "best", `"best" is not one of slo|cache|load|min-ttft`},
	{"dualmap", "choice", "", "is not one of"},
	{"dualmap", "rebalance", 3, "want a boolean, got int"},
	{"dualmap", "rebalance", "maybe", `"maybe" is not a boolean`},
	{"preble", "exploit", 1.5, "outside [0, 1]"},
	{"preble", "exploit", "-1", "outside"},
	{"preble", "imbalance", 0.5, "outside [1, 100]"},
	{"preble", "imbalance", []int{2}, "want a number"},
	{"random", "seed", -1, "-1 is not a whole number >= 0"},
	{"random", "seed", 1.5, "not a whole number"},
	{"random", "seed", "-3", "not a whole number"},
	{"random", "seed", "one", `"one" is not a number`},
}

func TestPolicyBadParams(t *testing.T) {
	for _, tt := range badParams {
		t.Run(fmt.Sprintf("%s/%s=%v", tt.policy, tt.key, tt.value), func(t *testing.T) {
			_, err := newPolicy(tt.policy, Params{tt.key: tt.value})
			if err == nil {
				t.Fatalf("newPolicy() error = nil, want one")
			}
			if prefix := "policy " + tt.policy + ": " + tt.key + ": "; !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("newPolicy() error = %q, want %q...%q", err, prefix, tt.want)
			}
		})
	}
	// Every parameter has a row.
	for _, name := range Policies() {
		def, _ := PolicyDefaults(name)
		for key := range def {
			if !slices.ContainsFunc(badParams, func(b badParam) bool { return b.policy == name && b.key == key }) {
				t.Errorf("badParams has no row for %s %s", name, key)
			}
		}
	}
}

// An unknown key is named, with the keys the policy knows.
func TestPolicyUnknownParam(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			def, _ := PolicyDefaults(name)
			p := Params{"bogus": 1, "zz": 2}
			for k, v := range def {
				p[k] = v // known keys beside it do not hide it
			}
			_, err := newPolicy(name, p)
			known := slices.Sorted(maps.Keys(def))
			if len(known) == 0 {
				known = []string{"none"}
			}
			want := fmt.Sprintf(`policy %s: unknown parameter "bogus" (known: %s)`, name, strings.Join(known, ", "))
			if err == nil || err.Error() != want {
				t.Errorf("newPolicy() error = %v, want %s", err, want)
			}
		})
	}
}

// Numbers and booleans may be given as strings (as the simulator's
// name(key=value) specs and quoted YAML do), and numbers as any Go number
// type a YAML decoder produces.
func TestPolicyParamStrings(t *testing.T) {
	tests := []struct {
		policy, key string
		value       any
		want        any
	}{
		{"consistent-hash-bounded-load", "bound", "1.5", 1.5},
		{"consistent-hash-bounded-load", "bound", uint64(2), 2.0},
		{"dualmap", "headroom", "0.5", 0.5},
		{"dualmap", "headroom", " 4 ", 4.0},
		{"dualmap", "headroom", int64(3), 3.0},
		{"dualmap", "headroom", float32(0.5), 0.5},
		{"dualmap", "tie", "0", 0.0},
		{"dualmap", "rebalance", "false", false},
		{"dualmap", "rebalance", "0", false},
		{"dualmap", "rebalance", false, false},
		{"dualmap", "hopeless", "load", "load"},
		{"dualmap", "overflow", "global", "global"},
		{"dualmap", "choice", "min-ttft", "min-ttft"},
		{"preble", "exploit", "0.25", 0.25},
		{"preble", "imbalance", "2", 2.0},
		{"random", "seed", "7", uint64(7)},
		{"random", "seed", "1e3", uint64(1000)},
		{"random", "seed", 7.0, uint64(7)},
		{"random", "seed", 0, uint64(0)},
		{"random", "seed", uint64(1) << 60, uint64(1) << 60},
		{"random", "seed", "18446744073709551615", uint64(1<<64 - 1)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s=%v", tt.policy, tt.key, tt.value), func(t *testing.T) {
			pol, err := newPolicy(tt.policy, Params{tt.key: tt.value})
			if err != nil {
				t.Fatalf("newPolicy() error = %v", err)
			}
			if got := paramValues(pol.(configurable))[tt.key]; got != tt.want {
				t.Errorf("%s = %v (%T), want %v (%T)", tt.key, got, got, tt.want, tt.want)
			}
		})
	}
	// Every default, written as a string, reads back as itself.
	for _, name := range Policies() {
		def, _ := PolicyDefaults(name)
		p := Params{}
		for k, v := range def {
			p[k] = fmt.Sprint(v)
		}
		pol, err := newPolicy(name, p)
		if err != nil {
			t.Errorf("newPolicy(%s, %v) error = %v", name, p, err)
			continue
		}
		if got := paramValues(pol.(configurable)); !reflect.DeepEqual(got, def) {
			t.Errorf("newPolicy(%s, %v) = %v, want %v", name, p, got, def)
		}
	}
}

// The decoder refuses, at registration, policy structs it could not fill.
func TestParamFields(t *testing.T) {
	type tagged struct {
		A float64 `param:"a"`
		//lint:ignore U1000 an unexported field is working state the decoder must skip
		b int
	}
	tests := []struct {
		name string
		typ  reflect.Type
		want string // "" for accepted
	}{
		{"tagged", reflect.TypeFor[*tagged](), ""},
		{"not a pointer", reflect.TypeFor[tagged](), "not a pointer to a struct"},
		{"no tag", reflect.TypeFor[*struct{ A float64 }](), "field A has no param tag"},
		{"int field", reflect.TypeFor[*struct {
			N int `param:"n"`
		}](), "parameter n: unsupported type int"},
		{"duplicate key", reflect.TypeFor[*struct {
			A float64 `param:"a"`
			B float64 `param:"a"`
		}](), "parameter a: two fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := paramFields(tt.typ)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("paramFields() error = %v, want %q", err, tt.want)
			}
		})
	}
}
