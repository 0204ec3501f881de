package scheduler

import (
	"testing"
	"time"
)

// shipped is the default dualmap policy as it ships: every field of Config
// at its default but the clock, with params on top. The pool has as many
// instances as the default has candidates, so every instance is a candidate
// of every key and a test can name the cache holder and the others without
// looking inside the rings.
func shipped(t *testing.T, params Params) (*Scheduler, []string) {
	t.Helper()
	def := DefaultConfig()
	s, _ := mustNew(t, Config{Params: params}, def.Candidates)
	ids := make([]string, def.Candidates)
	for i, in := range pool(def.Candidates) {
		ids[i] = in.ID
	}
	return s, ids
}

// defaultsInSeconds returns the shipped per-token cost, SLO and headroom,
// so the loads below are written as multiples of the SLO and stay right if
// a default moves.
func defaultsInSeconds(t *testing.T) (perToken, slo, headroom float64) {
	t.Helper()
	def := DefaultConfig()
	p, err := PolicyDefaults(def.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if def.Policy != "dualmap" || p["hopeless"] != "cache" || p["choice"] != "slo" || p["overflow"] != "none" {
		t.Fatalf("defaults = %s %v; this test is about dualmap with hopeless=cache, choice=slo, overflow=none", def.Policy, p)
	}
	return def.Cost.PerToken, def.SLO.Seconds(), p["headroom"].(float64)
}

// The SLO switch under the shipped defaults (headroom, hopeless = cache):
// the cache holder keeps a request while its estimate stays within
// headroom x SLO; past that the request moves to the candidate with the
// lowest estimate if, and only if, that one meets the SLO.
func TestDualMapSwitchUnderShippedDefaults(t *testing.T) {
	perToken, slo, headroom := defaultsInSeconds(t)
	tokens := func(sloMultiple float64) int { return int(sloMultiple * slo / perToken) }
	blocks := prompt(21, 1, 8, 8) // 4,096 tokens, all held by the holder
	tests := []struct {
		name   string
		holder float64    // its load, in multiples of the SLO
		others [3]float64 // the other three's (each adds its own prefill: 0.13 SLO)
		want   int        // index of the instance chosen; 0 is the holder
		reason Reason
		fb     int // index of the fallback: the lowest estimate of the others
	}{
		{name: "holder within the SLO", holder: 0.5, others: [3]float64{0.3, 0.1, 0.2}, want: 0, reason: ReasonCache, fb: 2},
		{name: "holder over the SLO within headroom", holder: (1 + headroom) / 2, others: [3]float64{0.1, 0.2, 0.3}, want: 0, reason: ReasonCache, fb: 1},
		// Its own prompt is all cached: nothing of it adds to the estimate.
		{name: "holder just within headroom", holder: headroom - 0.05, others: [3]float64{0.1, 0.2, 0.3}, want: 0, reason: ReasonCache, fb: 1},
		{name: "holder past headroom, others meet the SLO", holder: headroom + 0.5, others: [3]float64{0.6, 0.3, 0.8}, want: 2, reason: ReasonLoad, fb: 1},
		{name: "holder past headroom, one other meets the SLO", holder: headroom + 0.5, others: [3]float64{1.5, 0.7, 1.2}, want: 2, reason: ReasonLoad, fb: 3},
		{name: "holder past headroom, no other meets the SLO", holder: headroom + 0.5, others: [3]float64{1.5, 1.1, 1.2}, want: 0, reason: ReasonCache, fb: 2},
		{name: "holder far past headroom, no other meets the SLO", holder: 4 * headroom, others: [3]float64{1.05, 1.1, 3}, want: 0, reason: ReasonCache, fb: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ids := shipped(t, nil)
			if err := s.RecordCached(ids[0], blocks, time.Time{}); err != nil {
				t.Fatal(err)
			}
			loads := append([]float64{tt.holder}, tt.others[:]...)
			for i, l := range loads {
				if err := s.SetRemoteLoad(ids[i], Load{PendingTokens: tokens(l)}); err != nil {
					t.Fatal(err)
				}
			}
			r := &Request{Blocks: blocks, Tokens: 8 * 512}
			d, err := s.Pick(r)
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance != ids[tt.want] || d.Reason != tt.reason || d.Fallback != ids[tt.fb] {
				t.Errorf("Pick() = %s (%v) fallback %s, want %s (%v) fallback %s; loads in SLOs %v, holder %s",
					d.Instance, d.Reason, d.Fallback, ids[tt.want], tt.reason, ids[tt.fb], loads, ids[0])
			}
		})
	}
}

// The tie parameter under the shipped defaults (0.1): a cached prefix that
// is within tie x prompt of the longest counts as no advantage, so a short
// shared system prompt does not pull a request to a busier instance; a
// longer one does. Set explicitly, 0 makes any cached block count and 1
// makes every candidate equal.
func TestDualMapTie(t *testing.T) {
	const nblocks = 40 // 20,480 tokens
	full := prompt(22, 1, 40, nblocks)
	tests := []struct {
		name   string
		params Params
		held   int // blocks of the prompt the holder has
		want   int // index of the instance chosen; 0 is the holder, 1 the least loaded other
		reason Reason
	}{
		{name: "default: 5% cached is a tie", held: 2, want: 1, reason: ReasonTie},
		{name: "default: 7.5% cached is a tie", held: 3, want: 1, reason: ReasonTie},
		{name: "default: 15% cached wins", held: 6, want: 0, reason: ReasonCache},
		{name: "tie 0: 5% cached wins", params: Params{"tie": 0.0}, held: 2, want: 0, reason: ReasonCache},
		{name: "tie 0.2: 15% cached is a tie", params: Params{"tie": 0.2}, held: 6, want: 1, reason: ReasonTie},
		{name: "tie 1: 95% cached is a tie", params: Params{"tie": 1.0}, held: 38, want: 1, reason: ReasonTie},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ids := shipped(t, tt.params)
			if err := s.RecordCached(ids[0], full[:tt.held], time.Time{}); err != nil {
				t.Fatal(err)
			}
			// The holder is busier than the others by more than it saves
			// (a tie goes to the lowest estimate: another instance), yet
			// far within the SLO (cache wins when it counts).
			loads := []int{tt.held*512 + 4000, 100, 200, 300}
			for i, l := range loads {
				if err := s.SetRemoteLoad(ids[i], Load{PendingTokens: l}); err != nil {
					t.Fatal(err)
				}
			}
			d, err := s.Pick(&Request{Blocks: full, Tokens: nblocks * 512})
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance != ids[tt.want] || d.Reason != tt.reason {
				t.Errorf("Pick() = %s (%v), want %s (%v); holder %s has %d of %d blocks", d.Instance, d.Reason, ids[tt.want], tt.reason, ids[0], tt.held, nblocks)
			}
		})
	}
}

// With one candidate per key (Candidates 1) there is no other candidate to
// fall back to, whatever the pool's size.
func TestDualMapOneCandidateNoFallback(t *testing.T) {
	s, _ := mustNew(t, Config{Candidates: 1}, 4)
	for i := range 20 {
		d, err := s.Pick(req(prompt(uint64(i), 1, 2, 4)))
		if err != nil {
			t.Fatal(err)
		}
		if d.Fallback != "" || d.Reason != ReasonOnly {
			t.Errorf("Pick() = %s (%v) fallback %q, want no fallback (only)", d.Instance, d.Reason, d.Fallback)
		}
	}
}
