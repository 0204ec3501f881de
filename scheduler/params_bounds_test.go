package scheduler

import (
	"fmt"
	"math"
	"testing"
)

// Range ends are inside the range, and whole numbers given as floats or
// strings are read exactly, from 0 to the largest uint64; past the ends is
// refused.
func TestPolicyParamBounds(t *testing.T) {
	tests := []struct {
		policy, key string
		value       any
		want        any // stored value; nil: refused
	}{
		{"dualmap", "headroom", 0.01, 0.01},
		{"dualmap", "headroom", 8, 8.0},
		{"dualmap", "headroom", math.Nextafter(8, 9), nil},
		{"dualmap", "tie", 0, 0.0},
		{"dualmap", "tie", 1, 1.0},
		{"consistent-hash-bounded-load", "bound", 1, 1.0},
		{"consistent-hash-bounded-load", "bound", 100, 100.0},
		{"consistent-hash-bounded-load", "bound", math.Nextafter(1, 0), nil},
		{"preble", "exploit", 0, 0.0},
		{"preble", "imbalance", 100, 100.0},
		{"random", "seed", 0, uint64(0)},
		{"random", "seed", 0.0, uint64(0)},
		{"random", "seed", "0", uint64(0)},
		{"random", "seed", 1e3, uint64(1000)},
		{"random", "seed", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"random", "seed", math.Ldexp(1, 64), nil}, // 2^64: one past the largest
		{"random", "seed", math.Ldexp(1, 63), uint64(1) << 63},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s=%v", tt.policy, tt.key, tt.value), func(t *testing.T) {
			pol, err := newPolicy(tt.policy, Params{tt.key: tt.value})
			if tt.want == nil {
				if err == nil {
					t.Fatalf("newPolicy() = %v, want an error", paramValues(pol.(configurable))[tt.key])
				}
				return
			}
			if err != nil {
				t.Fatalf("newPolicy() error = %v", err)
			}
			if got := paramValues(pol.(configurable))[tt.key]; got != tt.want {
				t.Errorf("%s = %v (%T), want %v (%T)", tt.key, got, got, tt.want, tt.want)
			}
		})
	}
}
