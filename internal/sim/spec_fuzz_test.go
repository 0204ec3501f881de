package sim

import (
	"strings"
	"testing"
)

// FuzzParseSpec checks that ParseSpec never panics, that what it accepts
// has valid imperfect-information keys, and that applying it to the
// defaults either validates or fails with an error (never a panic).
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"dualmap", "dualmap-paper", "dualmap-paper(budget=20480)", "preble(cost_prior=3,index_drop=0.2,index_delay=500,metrics_poll=1000)",
		"dualmap(merge=1,split=2,window=200,rebalance_slo=0.5)", "dualmap(index_drop=2)", "x(", "(a=b)", "dualmap(=)",
	} {
		f.Add(s)
	}
	base, err := Options{}.withDefaults()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpec(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sim: ") {
				t.Fatalf("ParseSpec(%q) error %q lacks the package prefix", s, err)
			}
			return
		}
		if err := sp.checkInfo(); err != nil {
			t.Fatalf("ParseSpec(%q) accepted %+v: %v", s, sp, err)
		}
		_, _ = sp.apply(base).withDefaults()
	})
}
