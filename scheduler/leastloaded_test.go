package scheduler

import (
	"fmt"
	"testing"
)

// least-loaded takes the instance with the least work ahead, wherever it
// is in the pool.
func TestLeastLoadedPicksTheLeast(t *testing.T) {
	for _, loads := range [][3]int{{0, 100, 200}, {100, 0, 200}, {200, 100, 0}, {100, 200, 0}} {
		t.Run(fmt.Sprint(loads), func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: "least-loaded"}, 3)
			ids := pool(3)
			want := ""
			for i, l := range loads {
				mustLoad(t, s, ids[i].ID, Load{PendingTokens: l})
				if l == 0 {
					want = ids[i].ID
				}
			}
			d, err := s.Pick(req(prompt(1, 1, 0, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if d.Instance != want {
				t.Errorf("Pick() = %s, want %s (loads %v)", d.Instance, want, loads)
			}
		})
	}
}
