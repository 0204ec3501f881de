package extproc

import (
	"strings"
	"testing"
)

const eightInstances = `
pools:
  - instances:
      - address: 10.0.0.1:8000
      - address: 10.0.0.2:8000
      - address: 10.0.0.3:8000
      - address: 10.0.0.4:8000
      - address: 10.0.0.5:8000
      - address: 10.0.0.6:8000
      - address: 10.0.0.7:8000
      - address: 10.0.0.8:8000
`

// Identical prompts (a load test, a popular fixed prompt) through the
// ext_proc server spread over the pool: a cached request still costs its
// instance something, and once the key-depth window finds the prompt hot
// (its first bucket: 200 requests) it is replicated over more candidate
// sets and balanced inside them. 1,000 identical requests, 100 in flight
// at a time: the last 600 reach every instance, none with more than three
// times its share. /debug/instances shows the estimate's terms.
func TestIdenticalPromptsSpreadThroughServer(t *testing.T) {
	ts := start(t, parseConfig(t, eightInstances), false)
	body := chat("m", strings.Repeat("the same question every time ", 200), true)
	var open []*call
	late := map[string]int{}
	const n, inFlight, tail = 1000, 100, 600
	for i := range n {
		c := ts.open(t)
		br := ts.post(t, c, "/v1/chat/completions", body)
		dest := setHeader(br.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
		dest, _, _ = strings.Cut(dest, ",") // the primary; the fallback follows
		if dest == "" {
			t.Fatalf("request %d: no destination in %v", i, br)
		}
		c.responseHeaders(t, "200")
		open = append(open, c)
		if len(open) > inFlight {
			open[0].close()
			open = open[1:]
		}
		if i >= n-tail {
			late[dest]++
		}
	}
	most := 0
	for _, k := range late {
		most = max(most, k)
	}
	t.Logf("last %d requests: %v", tail, late)
	if len(late) < 8 || most > 3*tail/8 {
		t.Errorf("the last %d identical requests reached %d instances, the busiest %d times: want all 8, none above %d",
			tail, len(late), most, 3*tail/8)
	}
	for id, l := range ts.estimates(t) {
		if !(l.Estimate.Total > 0) || l.Estimate.Total < l.Estimate.Prefill+l.Estimate.Decode {
			t.Errorf("/debug/instances %s: estimate %+v, want positive terms that add up", id, l.Estimate)
		}
	}
	for _, c := range open {
		c.close()
	}
}
