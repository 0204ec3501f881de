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
