package scheduler

import "testing"

func TestExplainFilledOnlyWhenAsked(t *testing.T) {
	s, _ := mustNew(t, Config{}, 8)
	first := req(prompt(1, 1, 64, 64))
	if _, err := s.Submit(first, nil); err != nil {
		t.Fatal(err)
	}
	var e Explain
	r := req(prompt(1, 2, 64, 65)) // shares first's prefix
	r.Explain = &e
	dec, err := s.Submit(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.N != s.cfg.Candidates || e.Chosen < 0 || e.Chosen >= e.N {
		t.Fatalf("Explain N = %d, Chosen = %d; want %d candidates with the choice among them", e.N, e.Chosen, s.cfg.Candidates)
	}
	c := e.Candidates[e.Chosen]
	if c.ID != dec.Instance || c.CachedTokens != dec.CachedTokens || c.CachedTokens == 0 {
		t.Errorf("chosen candidate %+v, decision %+v: want the same instance and cached tokens (> 0)", c, dec)
	}
	seen := map[string]bool{}
	for _, c := range e.Candidates[:e.N] {
		if seen[c.ID] || c.ID == "" || c.EstimatedTTFT <= 0 {
			t.Errorf("candidate %+v: want distinct ids and a positive estimate", c)
		}
		seen[c.ID] = true
	}
	if first.Explain != nil {
		t.Error("a request without Explain got one")
	}
}

func TestExplainShowsTheBusyPrice(t *testing.T) {
	// TestChoicePricesABusyCandidate's pair: on a parallel engine with the
	// busy fit learned, the cold prompt goes to b, whose plain estimate is
	// the higher one; the explanation must show what tipped it.
	for _, parallel := range []bool{true, false} {
		s, q, a, b := busyPair(t, parallel)
		teachBusy(t, s, 16, 1)
		var e Explain
		r := req(q)
		r.Explain = &e
		d := route(t, s, r)
		if e.N != 2 || e.Chosen < 0 {
			t.Fatalf("parallel %v: Explain N = %d, Chosen = %d", parallel, e.N, e.Chosen)
		}
		by := map[string]Candidate{}
		for _, c := range e.Candidates[:e.N] {
			by[c.ID] = c
		}
		ca, cb := by[a], by[b]
		if !parallel {
			if ca.BusyExtra != 0 || cb.BusyExtra != 0 || d.Instance != a {
				t.Errorf("step-bound: chose %s, busy extras %v and %v; want %s and none", d.Instance, ca.BusyExtra, cb.BusyExtra, a)
			}
			continue
		}
		if d.Instance != b || cb.EstimatedTTFT <= ca.EstimatedTTFT {
			t.Fatalf("parallel: chose %s with estimates a %v, b %v; want b (%s) with the higher plain estimate", d.Instance, ca.EstimatedTTFT, cb.EstimatedTTFT, b)
		}
		if ca.EstimatedTTFT+ca.BusyExtra <= cb.EstimatedTTFT+cb.BusyExtra {
			t.Errorf("parallel: estimate + busy extra a %v + %v, b %v + %v: want b's sum the lower (what the choice compared)",
				ca.EstimatedTTFT, ca.BusyExtra, cb.EstimatedTTFT, cb.BusyExtra)
		}
	}
}
