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
// makes every candidate equal. The rows where the tie decides pin the
// home rule off (TestDualMapHome), which would keep this long prompt on
// its first candidate.
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
		{name: "default: 5% cached is a tie", params: Params{"home": 0.0}, held: 2, want: 1, reason: ReasonTie},
		{name: "default: 7.5% cached is a tie", params: Params{"home": 0.0}, held: 3, want: 1, reason: ReasonTie},
		{name: "default: 15% cached wins", held: 6, want: 0, reason: ReasonCache},
		{name: "tie 0: 5% cached wins", params: Params{"tie": 0.0}, held: 2, want: 0, reason: ReasonCache},
		{name: "tie 0.2: 15% cached is a tie", params: Params{"tie": 0.2, "home": 0.0}, held: 6, want: 1, reason: ReasonTie},
		{name: "tie 1: 95% cached is a tie", params: Params{"tie": 1.0, "home": 0.0}, held: 38, want: 1, reason: ReasonTie},
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

// The home rule (home 8; off by default): a long prompt that no
// candidate holds goes to its first candidate in ring order unless that
// one's estimate exceeds the lowest by more than home x the prompt's own
// prefill, or misses the SLO where another candidate meets it; a short one
// (own prefill below coldShare x SLO) goes by load.
func TestDualMapHome(t *testing.T) {
	perToken, slo, _ := defaultsInSeconds(t)
	// A long prompt's own prefill is about 0.3 x SLO, a short one's far
	// below coldShare x SLO.
	long := int(0.3*slo/perToken) / 512
	const short = 1
	if own := perToken * float64(long*512); own < coldShare*slo || own > 0.35*slo {
		t.Fatalf("a %d-block prompt's prefill (%.2fs) is not about 0.3 x SLO", long, own)
	}
	if own := perToken * short * 512; own >= coldShare*slo {
		t.Fatalf("a %d-block prompt's prefill (%.2fs) is not below coldShare x SLO", short, own)
	}
	busy := int(2 * slo / perToken) // work ahead that alone misses the SLO
	home8 := Params{"home": 8.0}
	tests := []struct {
		name   string
		params Params
		blocks int
		base   int     // every candidate's work ahead, in tokens
		extra  float64 // the home's work ahead beyond the others', in multiples of the prompt
		home   bool    // want the home, else the least loaded
	}{
		{name: "long, home a little busier, meets the SLO: home", params: home8, blocks: long, extra: 1, home: true},
		{name: "long, home misses the SLO, another meets it: least loaded", params: home8, blocks: long, extra: 3},
		{name: "long, all miss the SLO, home 7x its prefill busier: home", params: home8, blocks: long, base: busy, extra: 7, home: true},
		{name: "long, all miss the SLO, home 9x its prefill busier: least loaded", params: home8, blocks: long, base: busy, extra: 9},
		{name: "short, home a little busier: least loaded", params: home8, blocks: short, extra: 1},
		{name: "default (home 0): least loaded", blocks: long, extra: 1},
		{name: "home 2, all miss, 3x busier: least loaded", params: Params{"home": 2.0}, blocks: long, base: busy, extra: 3},
		{name: "home 2, all miss, 1x busier: home", params: Params{"home": 2.0}, blocks: long, base: busy, extra: 1, home: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ids := shipped(t, tt.params)
			full := prompt(23, 1, tt.blocks, tt.blocks)
			// On an idle pool every estimate is equal and the first
			// candidate in ring order, the home, wins whatever the rule.
			idle, err := s.Pick(&Request{Blocks: full, Tokens: tt.blocks * 512})
			if err != nil {
				t.Fatal(err)
			}
			home := idle.Instance
			least := ""
			others := tt.base + 100
			for _, id := range ids {
				l := others
				if id == home {
					l = tt.base + 100 + int(tt.extra*float64(tt.blocks*512))
				} else {
					if least == "" {
						least = id
					}
					others += 100
				}
				if err := s.SetRemoteLoad(id, Load{PendingTokens: l}); err != nil {
					t.Fatal(err)
				}
			}
			d, err := s.Pick(&Request{Blocks: full, Tokens: tt.blocks * 512})
			if err != nil {
				t.Fatal(err)
			}
			want := least
			if tt.home {
				want = home
			}
			if d.Instance != want || d.Reason != ReasonTie {
				t.Errorf("Pick() = %s (%v), want %s (tie); home %s, least loaded %s", d.Instance, d.Reason, want, home, least)
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
