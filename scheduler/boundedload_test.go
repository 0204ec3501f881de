package scheduler

import "testing"

// Consistent hashing with bounded loads keeps a key on its ring owner while
// the owner's requests (running and queued, this replica's and the
// others') plus this one stay within bound x the pool's average, and walks
// the ring past it otherwise.
func TestBoundedLoadCountsEveryReplicasRequests(t *testing.T) {
	tests := []struct {
		name         string
		owner, other Load // the owner's and every other instance's remote load
		stay         bool
	}{
		// 4 instances, bound 1.25: limit = ceil(1.25 x (1 + all requests) / 4).
		{name: "idle", stay: true}, // limit 1, owner 0+1
		{name: "owner runs 2 elsewhere", owner: Load{Running: 2}, stay: false},                                  // limit 1, owner 3
		{name: "owner queues 2 elsewhere", owner: Load{Queued: 2}, stay: false},                                 // limit 1, owner 3
		{name: "all equally busy", owner: Load{Running: 2}, other: Load{Running: 2}, stay: true},                // limit 3, owner 3
		{name: "all busy, owner most", owner: Load{Running: 1, Queued: 2}, other: Load{Queued: 1}, stay: false}, // limit 2, owner 4
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: "consistent-hash-bounded-load"}, 4)
			r := req(prompt(31, 1, 2, 4))
			d, err := s.Pick(r)
			if err != nil {
				t.Fatal(err)
			}
			owner := d.Instance
			for _, in := range pool(4) {
				l := tt.other
				if in.ID == owner {
					l = tt.owner
				}
				if err := s.SetRemoteLoad(in.ID, l); err != nil {
					t.Fatal(err)
				}
			}
			if d, err = s.Pick(r); err != nil {
				t.Fatal(err)
			}
			if stayed := d.Instance == owner; stayed != tt.stay {
				t.Errorf("Pick() = %s (%v), owner %s: stayed %v, want %v", d.Instance, d.Reason, owner, stayed, tt.stay)
			}
		})
	}
}
