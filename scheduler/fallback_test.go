package scheduler

import "testing"

// Policies that name no fallback of their own get the key's candidates':
// the other one of the pair when they chose inside it, else its first.
// cache-affinity (always the pair's first) tells the pair.
func TestFallbackIsTheKeysCandidate(t *testing.T) {
	const n = 8
	ref, _ := mustNew(t, Config{Policy: "cache-affinity", Candidates: 2}, n)
	for _, policy := range []string{"round-robin", "random", "least-loaded", "min-ttft", "preble", "consistent-hash-bounded-load"} {
		t.Run(policy, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: policy, Candidates: 2}, n)
			for i := range 16 {
				r := req(prompt(uint64(40+i), 1, 2, 4))
				pair, err := ref.Pick(r)
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.Pick(r)
				if err != nil {
					t.Fatal(err)
				}
				want := pair.Instance
				switch d.Instance {
				case pair.Instance:
					want = pair.Fallback
				case pair.Fallback:
					want = pair.Instance
				}
				if d.Fallback != want {
					t.Errorf("prompt %d: Pick() = %s fallback %s, want fallback %s (pair %s, %s)", i, d.Instance, d.Fallback, want, pair.Instance, pair.Fallback)
				}
			}
		})
	}
}
