package scheduler

import "testing"

// decode-capacity takes the instance where one more sequence decodes
// soonest: fewer running sequences beat a cached prefix.
func TestDecodeCapacityRunningBeatsCache(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "decode-capacity"}, 3)
	ids := pool(3)
	blocks := prompt(1, 1, 8, 8)
	if err := s.AddCached(ids[0].ID, blocks); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, ids[0].ID, Load{Running: 12})
	mustLoad(t, s, ids[1].ID, Load{Running: 3})
	mustLoad(t, s, ids[2].ID, Load{Running: 6})
	d, err := s.Pick(req(blocks))
	if err != nil {
		t.Fatal(err)
	}
	if d.Instance != ids[1].ID || d.Reason != ReasonPolicy {
		t.Errorf("Pick() = %s (%v), want %s (policy): the fewest running, whatever the cache", d.Instance, d.Reason, ids[1].ID)
	}
}

// Between instances of equal decode capacity the cached prefix decides.
func TestDecodeCapacityCacheBreaksTies(t *testing.T) {
	for holder := range 3 {
		s, _ := mustNew(t, Config{Policy: "decode-capacity"}, 3)
		ids := pool(3)
		blocks := prompt(1, 1, 8, 8)
		if err := s.AddCached(ids[holder].ID, blocks[:6]); err != nil {
			t.Fatal(err)
		}
		d, err := s.Pick(req(blocks))
		if err != nil {
			t.Fatal(err)
		}
		want := ReasonCache
		if holder == 0 {
			want = ReasonPolicy // the first lowest already holds it
		}
		if d.Instance != ids[holder].ID || d.Reason != want {
			t.Errorf("Pick() = %s (%v), want %s (%v): the holder of the prefix among equals", d.Instance, d.Reason, ids[holder].ID, want)
		}
	}
}

// KV memory near full weighs like more running sequences.
func TestDecodeCapacityMemoryPressure(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "decode-capacity"}, 2)
	ids := pool(2)
	if err := s.SetEngineLoad(ids[0].ID, EngineLoad{KVUsage: 0.99}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEngineLoad(ids[1].ID, EngineLoad{KVUsage: 0.2}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Pick(req(prompt(1, 1, 0, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Instance != ids[1].ID {
		t.Errorf("Pick() = %s, want %s: the other is at 99%% of its KV memory", d.Instance, ids[1].ID)
	}
}

// Ties are a band: tie 0 lets the cache decide only exact equals.
func TestDecodeCapacityTieBand(t *testing.T) {
	blocks := prompt(1, 1, 8, 8)
	for _, tt := range []struct {
		tie  float64
		want int
	}{{0, 1}, {1, 0}} {
		s, _ := mustNew(t, Config{Policy: "decode-capacity", Params: Params{"tie": tt.tie}}, 2)
		ids := pool(2)
		if err := s.AddCached(ids[0].ID, blocks); err != nil {
			t.Fatal(err)
		}
		mustLoad(t, s, ids[0].ID, Load{Running: 2})
		d, err := s.Pick(req(blocks))
		if err != nil {
			t.Fatal(err)
		}
		if d.Instance != ids[tt.want].ID {
			t.Errorf("tie %g: Pick() = %s, want %s", tt.tie, d.Instance, ids[tt.want].ID)
		}
	}
}
