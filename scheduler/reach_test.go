package scheduler

import (
	"fmt"
	"slices"
	"testing"
)

// outsider returns a member of s that is not in the candidate pair of
// blocks.
func outsider(t *testing.T, s *Scheduler, blocks []uint64) string {
	t.Helper()
	a, b := pairOf(t, s, blocks)
	for _, in := range s.Instances() {
		if in.ID != a && in.ID != b {
			return in.ID
		}
	}
	t.Fatal("no member outside the pair")
	return ""
}

// withHolder returns a scheduler over 8 instances with params, an 8-block
// prompt q of prefix id p whose first shared blocks another prompt of p put
// in the cache of h, a member outside q's pair.
func withHolder(t *testing.T, params Params, p uint64, shared int) (*Scheduler, []uint64, string) {
	t.Helper()
	s, _ := mustNew(t, pairConfig(params), 8)
	q := prompt(p, 2, shared, 8)
	h := outsider(t, s, q)
	if err := s.AddCached(h, prompt(p, 1, shared, 8)); err != nil {
		t.Fatal(err)
	}
	return s, q, h
}

func TestDualMapReachFindsHolderOutsideTheSet(t *testing.T) {
	// h, outside q's pair, holds q's first 2 blocks (1,024 of 4,096
	// tokens, past tie 0.1), as a request keyed to another set would have
	// left them; idle, it has the lower estimate: with reach q goes there.
	for _, reach := range []int{0, 8} {
		s, q, h := withHolder(t, Params{"reach": reach}, 9, 2)
		d := route(t, s, req(q))
		if reach == 0 {
			if d.Instance == h || d.Reason == ReasonHolder {
				t.Fatalf("reach 0: Submit() = %s (%v), want a candidate", d.Instance, d.Reason)
			}
			continue
		}
		if d.Instance != h || d.Reason != ReasonHolder || d.CachedTokens != 1024 {
			t.Fatalf("reach 8: Submit() = %s (%v, %d cached), want holder %s with 1024 cached", d.Instance, d.Reason, d.CachedTokens, h)
		}
		if d.Fallback == "" || d.Fallback == h {
			t.Fatalf("reach 8: fallback %q, want a candidate", d.Fallback)
		}
		r := req(q)
		if a := testing.AllocsPerRun(200, func() { _, _ = s.Pick(r) }); a != 0 {
			t.Fatalf("Pick() with reach allocates %v times", a)
		}
	}
}

// BenchmarkPickReach is BenchmarkPick's dualmap with the search outside the
// set off (reach 0) and at its default (64): pools of 8 and 64 search,
// 1,024 does not.
func BenchmarkPickReach(b *testing.B) {
	for _, reach := range []int{0, 64} {
		for _, n := range []int{8, 64, 1024} {
			b.Run(fmt.Sprintf("reach=%d/%d", reach, n), func(b *testing.B) {
				s, _ := mustNew(b, Config{Params: Params{"reach": reach}, Queue: QueueConfig{Budget: 16384}}, n)
				warm(b, s, 20*n)
				_, reqs := benchScheduler(b, "dualmap", 1)
				benchPicks(b, s, reqs)
			})
		}
	}
}

func TestDualMapReachLeavesALoadedHolder(t *testing.T) {
	// The holder's work ahead outweighs the 1,024 tokens it saves: the
	// request stays in its set (a lower estimate, never a hotspot).
	s, q, h := withHolder(t, Params{"reach": 8}, 10, 2)
	loadInstance(t, s, h, 2000)
	if d := route(t, s, req(q)); d.Instance == h || d.Reason == ReasonHolder {
		t.Fatalf("Submit() = %s (%v), want a candidate over the loaded holder %s", d.Instance, d.Reason, h)
	}
}

func TestDualMapReachNeedsMoreThanTie(t *testing.T) {
	// One shared block of 8 (12.5%) is past tie 0.1 and reaches; at tie
	// 0.2 it counts as no cache, and the request stays in its set.
	for _, tc := range []struct {
		tie  float64
		want bool
	}{{0.1, true}, {0.2, false}} {
		s, q, h := withHolder(t, Params{"reach": 8, "tie": tc.tie}, 11, 1)
		if d := route(t, s, req(q)); (d.Instance == h) != tc.want {
			t.Fatalf("tie %g: Submit() = %s (%v), holder %s chosen = %v, want %v", tc.tie, d.Instance, d.Reason, h, d.Instance == h, tc.want)
		}
	}
}

func TestDualMapReachOnlyInSmallPools(t *testing.T) {
	// reach 4 in a pool of 8: no search, the request stays in its set.
	s, q, h := withHolder(t, Params{"reach": 4}, 12, 2)
	if d := route(t, s, req(q)); d.Instance == h {
		t.Fatalf("Submit() = %s (%v), want a candidate: the pool is larger than reach", d.Instance, d.Reason)
	}
}

func TestDualMapReachSkipsUnready(t *testing.T) {
	s, q, h := withHolder(t, Params{"reach": 8}, 13, 2)
	if err := s.SetHealthy(h, false); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(q)); d.Instance == h {
		t.Fatalf("Submit() = %s, an unhealthy holder", d.Instance)
	}
}

func TestDualMapReachValidates(t *testing.T) {
	for _, bad := range []any{-1, 1025, "x"} {
		if _, err := New(pairConfig(Params{"reach": bad}), pool(2)); err == nil {
			t.Errorf("reach %v: New() accepted it", bad)
		}
	}
	if !slices.Contains(reasonNames[:], "holder") || ReasonHolder.String() != "holder" {
		t.Errorf("ReasonHolder.String() = %q", ReasonHolder.String())
	}
}

func TestDualMapReachPricesOwnTokensAsMeasured(t *testing.T) {
	// The holder's 2,000 tokens of work ahead outweigh the 1,024 tokens it
	// saves at the estimator's 1e-4 s a token (TestDualMapReachLeavesALoadedHolder).
	// Once first tokens show that a token of a request's own prompt costs
	// 1e-3 s and one of the work ahead 1e-5 s (an engine that prefills in
	// parallel), the saving is worth ten times more and the holder wins.
	s, q, h := withHolder(t, Params{"reach": 8}, 14, 2)
	loadInstance(t, s, h, 2000)
	for i := range 200 {
		own, ahead := float64(100+37*(i%50)), float64(3000*(i%7))
		s.est.ahead.observe(ahead, 0, own, 0.03+1e-3*own+1e-5*ahead)
	}
	if got := s.est.ahead.own(); got < 0.9e-3 || got > 1.1e-3 {
		t.Fatalf("fitted own cost %g, want about 1e-3", got)
	}
	if d := route(t, s, req(q)); d.Instance != h || d.Reason != ReasonHolder {
		t.Fatalf("Submit() = %s (%v), want the holder %s once own tokens cost 1e-3 s", d.Instance, d.Reason, h)
	}
}

func TestDualMapReachNotPastTheSLO(t *testing.T) {
	// Every instance is past the SLO (5 s at 1e-4 s a token): the holder
	// saves 1,024 tokens, yet the request stays in its set.
	s, q, h := withHolder(t, Params{"reach": 8, "hopeless": "cache"}, 15, 2)
	for _, in := range s.Instances() {
		loadInstance(t, s, in.ID, 60000)
	}
	if d := route(t, s, req(q)); d.Instance == h || d.Reason == ReasonHolder {
		t.Fatalf("Submit() = %s (%v), want a candidate: the holder misses the SLO", d.Instance, d.Reason)
	}
}
