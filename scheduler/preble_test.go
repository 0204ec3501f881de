package scheduler

import (
	"testing"
	"time"
)

// Preble's load signal is the uncached tokens sent to an instance, decayed
// with a 3-minute time constant: after 180 s a load counts 1/e of itself,
// after 60 s e^(-1/3). With nothing cached anywhere (explore), the request
// goes to the lowest load.
func TestPrebleRecentLoadDecays(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration // between the old load and the fresh ones
		want  int           // index of the instance chosen
	}{
		{"old load decayed to 1/e", 180 * time.Second, 0},   // 10,240/e = 3,767 < 4,096 < 5,120
		{"old load decayed to e^-1/3", 60 * time.Second, 2}, // 7,337 > 5,120 > 4,096
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := mustNew(t, Config{Policy: "preble"}, 3)
			ids := pool(3)
			load := func(i, tokens int) {
				if err := s.RecordCached(ids[i].ID, prompt(uint64(100+i), 0, tokens/512, tokens/512), time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(time.Hour) // loads recorded long after the epoch: the decay runs from when they were
			load(0, 10240)
			clk.Advance(tt.after)
			load(1, 5120)
			load(2, 4096)
			d, err := s.Pick(req(prompt(7, 7, 0, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance != ids[tt.want].ID {
				t.Errorf("Pick() = %s (%v), want %s", d.Instance, d.Reason, ids[tt.want].ID)
			}
		})
	}
}

// Preble chooses by load cost = recent load + the uncached rest of the
// prompt: among the instances holding more than exploit (0.5) of the
// prompt when there are any (exploit), else among all (explore); and it
// gives the request to the cheapest instance of the pool instead when the
// choice costs more than imbalance (1.5) x that.
func TestPrebleExploitExploreImbalance(t *testing.T) {
	const nblocks = 20 // 10,240 tokens; idle instances without the prompt cost 10,240
	p := prompt(50, 1, nblocks, nblocks)
	tests := []struct {
		name        string
		held        int // blocks of p instance 0 holds
		load        int // instance 0's recent load, in 512-token blocks
		want        int // index of the instance chosen; 1 is the cheapest other
		reason      Reason
		fallbackTo0 bool
	}{
		{name: "exploit, idle holder", held: 16, load: 0, want: 0, reason: ReasonCache},                              // 2,048
		{name: "exploit, busy holder within imbalance", held: 16, load: 24, want: 0, reason: ReasonCache},            // 14,336 <= 15,360
		{name: "exploit, holder at exactly imbalance", held: 16, load: 26, want: 0, reason: ReasonCache},             // 15,360 = 1.5 x 10,240
		{name: "exploit, holder past imbalance", held: 16, load: 27, want: 1, reason: ReasonLoad, fallbackTo0: true}, // 15,872 > 15,360
		{name: "explore: 20% held is not enough", held: 4, load: 0, want: 0, reason: ReasonPolicy},                   // 8,192 < 10,240
		{name: "explore, busier holder", held: 4, load: 5, want: 1, reason: ReasonPolicy},                            // 10,752 > 10,240
		{name: "exactly half held: explore", held: 10, load: 0, want: 0, reason: ReasonPolicy},                       // 5,120, chosen among all
		{name: "just over half held: exploit", held: 11, load: 0, want: 0, reason: ReasonCache},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := mustNew(t, Config{Policy: "preble"}, 3)
			ids := pool(3)
			clk.Advance(10 * time.Hour)
			// The cache, recorded 10 hours ago: it adds no recent load
			// (8,192 x e^-200, lost in the sums below).
			if err := s.RecordCached(ids[0].ID, p[:tt.held], time.Unix(1_700_000_000, 0)); err != nil {
				t.Fatal(err)
			}
			if tt.load > 0 {
				if err := s.RecordCached(ids[0].ID, prompt(51, 1, tt.load, tt.load), time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			// The third instance is a little busy, so the cheapest other is ids[1].
			if err := s.RecordCached(ids[2].ID, prompt(52, 1, 1, 1), time.Time{}); err != nil {
				t.Fatal(err)
			}
			d, err := s.Pick(&Request{Blocks: p, Tokens: nblocks * 512})
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance != ids[tt.want].ID || d.Reason != tt.reason {
				t.Errorf("Pick() = %s (%v), want %s (%v)", d.Instance, d.Reason, ids[tt.want].ID, tt.reason)
			}
			if tt.fallbackTo0 && d.Fallback != ids[0].ID {
				t.Errorf("Pick() fallback = %s, want the exploit choice %s", d.Fallback, ids[0].ID)
			}
			if !tt.fallbackTo0 {
				// No fallback of its own: the key's first other candidate,
				// which cache-affinity (the key's first candidate, then the
				// next) tells.
				ref, _ := mustNew(t, Config{Policy: "cache-affinity"}, 3)
				pair, err := ref.Pick(&Request{Blocks: p, Tokens: nblocks * 512})
				if err != nil {
					t.Fatal(err)
				}
				want := pair.Instance
				if d.Instance == pair.Instance {
					want = pair.Fallback
				}
				if d.Fallback != want {
					t.Errorf("Pick() fallback = %s, want the key's candidate %s", d.Fallback, want)
				}
			}
		})
	}
}
