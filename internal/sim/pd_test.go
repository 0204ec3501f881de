package sim

import (
	"testing"
	"time"
)

// A P/D run serves every request at light load, sends the prompts the
// decider picks to the prefill instances, and releases every half.
func TestSimulatePDConservesAndReleases(t *testing.T) {
	tr := smallTrace(t, 600)
	for _, tt := range []struct {
		name       string
		pd         PDOptions
		wantRemote bool
	}{
		{"decider on", PDOptions{Prefill: 2, Decode: 2}, true},
		{"never remote", PDOptions{Prefill: 2, Decode: 2, MinUncachedTokens: 1 << 30}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := SimulatePD(tr, 2, Options{Queue: QueueEngine, Warmup: 100, Horizon: 10 * time.Minute}, tt.pd)
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != res.Requests || res.Requests != 500 {
				t.Errorf("completed %d of %d requests (failed %d, unfinished %d), want all 500", res.Completed, res.Requests, res.Failed, res.Unfinished)
			}
			if (res.Remote > 0) != tt.wantRemote || res.Remote > res.Requests {
				t.Errorf("remote prefills = %d of %d, want some: %v", res.Remote, res.Requests, tt.wantRemote)
			}
			if res.CacheHitRate <= 0 || res.CacheHitRate >= 1 {
				t.Errorf("CacheHitRate = %v, want in (0, 1)", res.CacheHitRate)
			}
		})
	}
}

// Both halves hold nothing once every request is over.
func TestSimulatePDHalvesIdleAtTheEnd(t *testing.T) {
	tr := smallTrace(t, 300)
	opt, err := Options{Queue: QueueEngine, Warmup: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	opt.Instances = 4
	pd, err := PDOptions{Prefill: 2, Decode: 2}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := &pdCluster{cluster: &cluster{opt: opt, index: map[string]int{}}, pd: pd}
	if err := c.buildPD(); err != nil {
		t.Fatal(err)
	}
	c.load(tr, 4)
	c.legs = make([]pdLeg, len(c.reqs))
	c.unavail = make([]bool, len(c.reqs))
	c.runPD()
	remote := 0
	for i := range c.legs {
		if c.legs[i].remote {
			remote++
		}
	}
	if c.ended != len(c.reqs) || remote == 0 {
		t.Fatalf("ended %d of %d, %d remote: want all ended, some remote", c.ended, len(c.reqs), remote)
	}
	for _, st := range append(c.pre.Instances(), c.dec.Instances()...) {
		if st.Running != 0 || st.PendingTokens != 0 || st.Queued != 0 {
			t.Errorf("%s holds load at the end: running %d, pending %d, queued %d", st.ID, st.Running, st.PendingTokens, st.Queued)
		}
	}
}

func TestPDOptionsInvalid(t *testing.T) {
	for _, pd := range []PDOptions{{Prefill: 0, Decode: 2}, {Prefill: 2}, {Prefill: 1, Decode: 1, TransferPerToken: -1}, {Prefill: 1, Decode: 1, DecodeHitRatio: 2}} {
		if _, err := SimulatePD(smallTrace(t, 10), 1, Options{}, pd); err == nil {
			t.Errorf("SimulatePD(%+v) error = nil, want one", pd)
		}
	}
}
