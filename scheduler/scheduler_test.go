package scheduler

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// maxOverMean routes count uniformly random, uncacheable requests that
// never finish and returns max/mean of per-instance pending tokens.
func maxOverMean(t *testing.T, policy string, n, count int) float64 {
	list := pool(n)
	for i := range list {
		list[i].CacheTokens = 1 // less than one block: nothing is ever cached
	}
	s, err := New(Config{Policy: policy, Cost: CostConfig{LearnRate: -1}}, list)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < count; i++ {
		route(t, s, req(prompt(rng.Uint64(), rng.Uint64(), 0, 4)))
	}
	maxP, sum := 0, 0
	for _, st := range s.Instances() {
		maxP = max(maxP, st.PendingTokens)
		sum += st.PendingTokens
	}
	return float64(maxP) / (float64(sum) / float64(n))
}

// Power of two choices: with random keys and no cache, dualmap's max/mean
// load is clearly below single-hash cache affinity's.
func TestPowerOfTwoChoices(t *testing.T) {
	for _, n := range []int{8, 64} {
		count := 200 * n
		dm := maxOverMean(t, "dualmap", n, count)
		ca := maxOverMean(t, "cache-affinity", n, count)
		t.Logf("n=%d, %d requests: max/mean load dualmap %.3f, cache-affinity %.3f", n, count, dm, ca)
		if dm > ca-0.1 {
			t.Errorf("n=%d: dualmap max/mean %.3f, want at least 0.1 below cache-affinity's %.3f", n, dm, ca)
		}
	}
}

func TestMembershipReroutesQueued(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}
	s, _ := mustNew(t, cfg, 4)
	var queued []*Request
	var target string
	for i := 0; len(queued) < 5 && i < 1000; i++ {
		r := req(prompt(7, uint64(i), 2, 4)) // same key: same instance
		d := route(t, s, r)
		target = d.Instance
		if d.Queued {
			queued = append(queued, r)
		}
	}
	if len(queued) < 5 {
		t.Fatal("could not queue requests")
	}
	var rest []Instance
	for _, in := range pool(4) {
		if in.ID != target {
			rest = append(rest, in)
		}
	}
	out := recorder(s)
	if err := s.SetInstances(rest); err != nil {
		t.Fatal(err)
	}
	// Nothing lost: every queued request was dispatched elsewhere or waits
	// in another queue.
	seen := map[*Request]bool{}
	for _, d := range out.sent {
		seen[d.Request] = true
		if d.Decision.Instance == target || d.Decision.Reason != ReasonRerouted {
			t.Errorf("dispatched %+v, want rerouted away from %s", d.Decision, target)
		}
	}
	if len(out.sent)+s.QueueLen() != len(queued) {
		t.Errorf("after removal: %d dispatched + %d queued, want %d", len(out.sent), s.QueueLen(), len(queued))
	}
	if st := s.Stats(); st.Rerouted != uint64(len(queued)) || st.Failed != 0 {
		t.Errorf("Stats() = %+v, want %d rerouted, 0 failed", st, len(queued))
	}
	// Finishing a request dispatched to the removed instance is harmless.
	s.Complete(queued[0])
}

func TestDrainAndHealth(t *testing.T) {
	s, _ := mustNew(t, Config{}, 4)
	ids := pool(4)
	if err := s.SetDraining(ids[0].ID, true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHealthy(ids[1].ID, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		d := route(t, s, req(prompt(uint64(i), 1, 2, 3)))
		if d.Instance == ids[0].ID || d.Instance == ids[1].ID {
			t.Fatalf("Submit() = %s, a draining or unhealthy instance", d.Instance)
		}
	}
	if err := s.SetHealthy("nope:1", true); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("SetHealthy(unknown) error = %v, want ErrUnknownInstance", err)
	}
}

func TestRemovalWithNoReadyInstanceFailsQueued(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	route(t, s, req(prompt(1, 1, 0, 4)))
	waiting := req(prompt(2, 2, 0, 4))
	if d := route(t, s, waiting); !d.Queued {
		t.Fatal("want queued")
	}
	out := recorder(s)
	if err := s.SetInstances(nil); err != nil {
		t.Fatal(err)
	}
	if len(out.failed) != 1 || out.failed[0].Request != waiting || !errors.Is(out.failed[0].Err, ErrNoEndpoint) {
		t.Errorf("Failed = %+v, want the waiting request with ErrNoEndpoint", out.failed)
	}
}

func TestLearnsCostFromFirstTokens(t *testing.T) {
	s, clk := mustNew(t, Config{Cost: CostConfig{PerToken: 1e-4}}, 2)
	for i := 0; i < 200; i++ {
		r := req(prompt(uint64(i), uint64(i), 0, 4)) // 2048 uncached tokens
		route(t, s, r)
		clk.Advance(2048 * 300 * time.Microsecond) // 3x the prior
		s.FirstToken(r)
		s.Complete(r)
	}
	for _, st := range s.Instances() {
		if st.CostPerToken < 2.5e-4 || st.CostPerToken > 3.5e-4 {
			t.Errorf("%s learned %g s/token, want about 3e-4", st.ID, st.CostPerToken)
		}
	}
}

func TestKeyDepthThroughScheduler(t *testing.T) {
	s, _ := mustNew(t, Config{KeyDepth: KeyDepthConfig{Window: 500}}, 8)
	// 60% of requests share a 5-block prefix.
	for i := 0; i < 3000; i++ {
		var p []uint64
		if i%5 < 3 {
			p = prompt(1, uint64(i), 5, 8)
		} else {
			p = prompt(uint64(i+10), uint64(i), 0, 8)
		}
		var out outcome
		d, err := s.Submit(req(p), &out)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range out.sent {
			s.Complete(x.Request)
		}
		_ = d
	}
	d, _ := s.Pick(req(prompt(1, 99999, 5, 8)))
	if d.KeyDepth < 6 {
		t.Errorf("KeyDepth of the hot prefix = %d, want > 5", d.KeyDepth)
	}
	if len(s.KeyDepthState().Splits) == 0 {
		t.Error("KeyDepthState() has no splits")
	}
	// The hot prefix now spreads over more than one pair.
	used := map[string]bool{}
	for i := 0; i < 200; i++ {
		d, _ := s.Pick(req(prompt(1, uint64(100000+i), 5, 8)))
		used[d.Instance] = true
	}
	if len(used) < 4 {
		t.Errorf("hot prefix spread over %d instances, want >= 4", len(used))
	}
}

// A request re-routed while it waits keeps its wait: MaxWait still applies.
func TestRerouteKeepsWait(t *testing.T) {
	cfg := Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100, MaxWait: 30 * time.Second}}
	s, clk := mustNew(t, cfg, 2)
	ids := pool(2)
	// Find one prompt for each instance and keep both instances busy.
	var onA, onB []uint64
	for i := uint64(0); onA == nil || onB == nil; i++ {
		p := prompt(i, i, 2, 4)
		d, _ := s.Pick(req(p))
		if d.Instance == ids[0].ID && onA == nil {
			onA = p
		} else if d.Instance == ids[1].ID && onB == nil {
			onB = p
		}
	}
	route(t, s, req(onA))
	route(t, s, req(onB))
	waiting := req(onA)
	if d := route(t, s, waiting); !d.Queued || d.Instance != ids[0].ID {
		t.Fatalf("Submit() = %+v, want queued on %s", d, ids[0].ID)
	}
	clk.Advance(25 * time.Second)
	out := recorder(s)
	if err := s.SetDraining(ids[0].ID, true); err != nil { // re-routed to the busy B: queued there
		t.Fatal(err)
	}
	if len(out.sent) != 0 || s.QueueLen() != 1 {
		t.Fatalf("after draining: %d dispatched, %d queued; want it queued on %s", len(out.sent), s.QueueLen(), ids[1].ID)
	}
	clk.Advance(10 * time.Second)
	out.reset()
	s.Tick()
	if len(out.failed) != 1 || out.failed[0].Request != waiting || !errors.Is(out.failed[0].Err, ErrQueueTimeout) {
		t.Errorf("request queued 35 s in all (re-routed at 25 s): failed %+v, want it expired at MaxWait 30 s", out.failed)
	}
}
