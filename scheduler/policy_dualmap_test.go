package scheduler

import (
	"testing"
	"time"
)

// pairConfig is the paper's pair with headroom 1 and the load switch even
// when the other candidate also misses the SLO, plus extra params.
func pairConfig(extra Params) Config {
	p := Params{"headroom": 1.0, "hopeless": "load"}
	for k, v := range extra {
		p[k] = v
	}
	return Config{Candidates: 2, Cost: CostConfig{PerToken: 1e-4, LearnRate: -1}, Params: p}
}

// pairOf returns the two candidates of a prompt in a scheduler.
func pairOf(t *testing.T, s *Scheduler, blocks []uint64) (string, string) {
	t.Helper()
	d, err := s.Pick(req(blocks))
	if err != nil {
		t.Fatal(err)
	}
	return d.Instance, d.Fallback
}

// loadInstance dispatches uncached work of tokens to id through requests
// that never complete.
func loadInstance(t *testing.T, s *Scheduler, id string, tokens int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[id].pendingTokens.add(tokens)
}

func TestDualMapPrefersCacheThenLoad(t *testing.T) {
	// 1e-4 s/token and a 5 s SLO: the cache choice may hold 50,000 tokens.
	s, _ := mustNew(t, pairConfig(nil), 8)
	p := prompt(1, 1, 6, 8)
	// Cold: equal (zero) hits, the less loaded of the pair.
	a, b := pairOf(t, s, p)
	loadInstance(t, s, a, 1000)
	if d := route(t, s, req(p)); d.Instance != b || d.Reason != ReasonTie {
		t.Fatalf("cold Submit() = %s (%v), want the less loaded %s (tie)", d.Instance, d.Reason, b)
	}
	// b now holds the prefix: a request sharing it goes to b even though b
	// is more loaded than a, while b stays within the SLO.
	loadInstance(t, s, b, 20000)
	q := prompt(1, 2, 6, 8)
	if d := route(t, s, req(q)); d.Instance != b || d.Reason != ReasonCache {
		t.Fatalf("warm Submit() = %s (%v), want cache holder %s (cache)", d.Instance, d.Reason, b)
	}
	// Overload b past the SLO: load wins.
	loadInstance(t, s, b, 60000)
	r := prompt(1, 3, 6, 8)
	if d := route(t, s, req(r)); d.Instance != a || d.Reason != ReasonLoad {
		t.Fatalf("hot Submit() = %s (%v), want %s (load)", d.Instance, d.Reason, a)
	}
}

func TestDualMapHeadroom(t *testing.T) {
	// headroom 0.5: the cache choice switches at half the SLO already.
	s, _ := mustNew(t, pairConfig(Params{"headroom": 0.5}), 8)
	p := prompt(2, 1, 6, 8)
	a, b := pairOf(t, s, p)
	loadInstance(t, s, a, 1000)
	route(t, s, req(p))          // b caches
	loadInstance(t, s, b, 30000) // 3 s + own: over 2.5 s, under 5 s
	if d := route(t, s, req(prompt(2, 2, 6, 8))); d.Instance != a || d.Reason != ReasonLoad {
		t.Fatalf("Submit() = %s (%v), want %s (load) at headroom 0.5", d.Instance, d.Reason, a)
	}
}

func TestDualMapOverflowGlobal(t *testing.T) {
	for _, overflow := range []string{"none", "global"} {
		t.Run(overflow, func(t *testing.T) {
			s, _ := mustNew(t, pairConfig(Params{"overflow": overflow}), 8)
			p := prompt(3, 1, 6, 8)
			a, b := pairOf(t, s, p)
			loadInstance(t, s, a, 80000)
			loadInstance(t, s, b, 90000)
			d := route(t, s, req(p))
			inPair := d.Instance == a || d.Instance == b
			if overflow == "none" && (d.Instance != a || d.Reason != ReasonTie) {
				t.Errorf("Submit() = %s (%v), want %s inside the pair", d.Instance, d.Reason, a)
			}
			if overflow == "global" && (inPair || d.Reason != ReasonOverflow) {
				t.Errorf("Submit() = %s (%v), want an idle instance outside the pair (overflow)", d.Instance, d.Reason)
			}
		})
	}
}

func TestDualMapAblationChoices(t *testing.T) {
	p := prompt(4, 1, 6, 8)
	tests := []struct {
		choice string
		want   func(a, b string) string
	}{
		// a holds the prefix and is more loaded but within the SLO.
		{"slo", func(a, b string) string { return a }},
		{"cache", func(a, b string) string { return a }},
		{"load", func(a, b string) string { return b }},
		{"min-ttft", func(a, b string) string { return b }}, // 10000 ahead + 512 own < 20000 ahead
	}
	for _, tt := range tests {
		t.Run(tt.choice, func(t *testing.T) {
			s, _ := mustNew(t, pairConfig(Params{"choice": tt.choice}), 8)
			a, b := pairOf(t, s, p)
			// Make a hold the prefix.
			s.mu.Lock()
			s.byID[a].addKV(p)
			s.mu.Unlock()
			loadInstance(t, s, a, 20000)
			loadInstance(t, s, b, 10000)
			if d := route(t, s, req(prompt(4, 2, 6, 8))); d.Instance != tt.want(a, b) {
				t.Errorf("choice=%s Submit() = %s, want %s", tt.choice, d.Instance, tt.want(a, b))
			}
		})
	}
}

// With hopeless=cache (the default), a request whose candidates would all
// miss the SLO stays with the cache holder instead of moving for nothing.
func TestDualMapHopelessStaysWithCache(t *testing.T) {
	for _, hopeless := range []string{"cache", "load"} {
		t.Run(hopeless, func(t *testing.T) {
			s, _ := mustNew(t, pairConfig(Params{"hopeless": hopeless}), 8)
			p := prompt(6, 1, 6, 8)
			a, b := pairOf(t, s, p)
			s.mu.Lock()
			s.byID[a].addKV(p)
			s.mu.Unlock()
			loadInstance(t, s, a, 90000) // 9 s
			loadInstance(t, s, b, 60000) // 6 s: lower, but also over the SLO
			d := route(t, s, req(prompt(6, 2, 6, 8)))
			want := map[string]string{"cache": a, "load": b}[hopeless]
			if d.Instance != want {
				t.Errorf("hopeless=%s Submit() = %s (%v), want %s", hopeless, d.Instance, d.Reason, want)
			}
		})
	}
}

func TestPerRequestSLO(t *testing.T) {
	s, _ := mustNew(t, pairConfig(nil), 8)
	p := prompt(5, 1, 6, 8)
	a, _ := pairOf(t, s, p)
	s.mu.Lock()
	s.byID[a].addKV(p)
	s.mu.Unlock()
	loadInstance(t, s, a, 20000) // ~2 s: fine for 5 s, not for 1 s
	batch := req(prompt(5, 2, 6, 8))
	if d := route(t, s, batch); d.Instance != a {
		t.Errorf("default SLO Submit() = %s, want cache holder %s", d.Instance, a)
	}
	interactive := req(prompt(5, 3, 6, 8))
	interactive.SLO = time.Second
	if d := route(t, s, interactive); d.Instance == a || d.Reason != ReasonLoad {
		t.Errorf("1 s SLO Submit() = %s (%v), want the other candidate (load)", d.Instance, d.Reason)
	}
}

// Same prefix -> same pair on every call, and after membership changes that
// do not touch the pair.
func TestSamePrefixSamePair(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity"}, 16)
	type pair struct{ a, b string }
	before := map[int]pair{}
	for i := 0; i < 500; i++ {
		a, b := pairOf(t, s, prompt(uint64(i), 1, 2, 4))
		a2, b2 := pairOf(t, s, prompt(uint64(i), 2, 2, 6)) // same 2-block key, other tail
		if a != a2 || b != b2 {
			t.Fatalf("prefix %d: pair (%s,%s) then (%s,%s)", i, a, b, a2, b2)
		}
		before[i] = pair{a, b}
	}
	list := pool(17)
	removed := list[3].ID
	list = append(list[:3], list[4:]...) // remove one, add one (the 17th)
	if err := s.SetInstances(list); err != nil {
		t.Fatal(err)
	}
	added := pool(17)[16].ID
	kept := 0
	for i, p := range before {
		a, b := pairOf(t, s, prompt(uint64(i), 1, 2, 4))
		touched := p.a == removed || p.b == removed || a == added || b == added
		if touched {
			continue
		}
		kept++
		if a != p.a || b != p.b {
			t.Errorf("prefix %d: pair (%s,%s) became (%s,%s) though the change did not touch it", i, p.a, p.b, a, b)
		}
	}
	if kept < 300 {
		t.Errorf("only %d of 500 pairs untouched by a 1-in/1-out change, want most", kept)
	}
}
