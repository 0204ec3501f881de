package state

import (
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord/coordtest"
)

// redisNetwork is a coordtest.Network over the Redis at addr: each node is
// a RedisStore (not running: the scenario drives the rounds), on Redis's
// and the host's real clock.
func redisNetwork(addr string) coordtest.Network {
	return coordtest.Network{
		Join: func(t testing.TB, id string) coordtest.Node {
			s, err := NewRedis(RedisOptions{Addrs: []string{addr}, Pool: "scenario", Replica: id, Logger: quietLogger()})
			if err != nil {
				t.Fatalf("NewRedis(%s) error = %v", id, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return coordtest.Node{
				Transport:  s,
				Dispatched: s.Dispatched,
				Flush: func() {
					if _, err := s.flush(t.Context()); err != nil {
						t.Fatalf("%s: flush: %v", id, err)
					}
				},
			}
		},
		Now:     time.Now,
		Advance: time.Sleep,
	}
}

// TestCoordinationTransportsAgree plays one scenario (leader election and
// handovers, load merging, key-depth publication, dispatch records,
// migration leases, stale data) through the same coord code over the
// in-process hub and over Redis, and checks that every step came out the
// same.
func TestCoordinationTransportsAgree(t *testing.T) {
	addr, _, _ := startRedis(t)
	hub := coordtest.Scenario(t, coordtest.HubNetwork())
	rds := coordtest.Scenario(t, redisNetwork(addr))
	if len(hub) == 0 {
		t.Fatal("the scenario logged nothing")
	}
	for i := range max(len(hub), len(rds)) {
		var h, r string
		if i < len(hub) {
			h = hub[i]
		}
		if i < len(rds) {
			r = rds[i]
		}
		if h != r {
			t.Errorf("step %d differs:\n  hub:   %s\n  redis: %s", i, h, r)
		}
	}
	if !t.Failed() {
		t.Logf("%d steps alike, e.g.:\n%s", len(hub), strings.Join(hub[:6], "\n"))
	}
}
