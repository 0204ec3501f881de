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
