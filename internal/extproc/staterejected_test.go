package extproc

import (
	"testing"
)

// TestStateRejectedMetric: the store's counters of what Redis returned
// and was not used are on the router's metrics, one series per reason.
func TestStateRejectedMetric(t *testing.T) {
	ts := start(t, parseConfig(t, fourInstances), false)
	ts.srv.pools.UpdateGauges()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "dualmap_state_rejected" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					reasons[l.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{"reply", "malformed", "oversized", "clamped", "ignored", "bad_clock", "panic", "unsigned"} {
		if !reasons[want] {
			t.Errorf("dualmap_state_rejected has no reason=%q series (has %v)", want, reasons)
		}
	}
}
