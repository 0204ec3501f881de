package sim

import (
	"testing"
)

// Past capacity DualMap keeps serving on-time requests at about the rate
// the pool sustains: at twice the rate at which it still meets the SLO for
// 90% of requests, the on-time requests per second do not collapse (late
// requests wait behind on-time ones instead of taking their engine time),
// and every request but a few long answers still decoding is finished or
// failed (shed after the router queue's 30 s wait) within the horizon.
func TestOverloadKeepsServingOnTimeRequests(t *testing.T) {
	tr := smallTrace(t, 1200)
	opts := Options{Policy: "dualmap", Instances: 4, Warmup: 100}
	// The highest rate of a coarse sweep with >= 90% attainment.
	var capQPS float64
	var capOnTime float64
	for _, q := range []float64{2, 3, 4, 5, 6, 8, 10, 12} {
		res, err := Simulate(tr, q, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.SLOAttainment < 0.9 {
			break
		}
		capQPS, capOnTime = q, res.SLOAttainment*q
	}
	if capQPS == 0 {
		t.Fatal("no rate with >= 90% attainment")
	}
	over, err := Simulate(tr, 2*capQPS, opts)
	if err != nil {
		t.Fatal(err)
	}
	onTime := over.SLOAttainment * 2 * capQPS
	t.Logf("capacity %.0f QPS: %.2f on-time/s; at %.0f QPS: %.2f on-time/s, attainment %.2f, unfinished %d, failed %d",
		capQPS, capOnTime, 2*capQPS, onTime, over.SLOAttainment, over.Unfinished, over.Failed)
	if onTime < 0.75*capOnTime {
		t.Errorf("at 2x capacity %.2f on-time requests/s, want >= 75%% of the %.2f at capacity", onTime, capOnTime)
	}
	if over.Unfinished > over.Requests/100 {
		t.Errorf("at 2x capacity %d of %d requests unfinished at the horizon, want at most 1%%", over.Unfinished, over.Requests)
	}
}
