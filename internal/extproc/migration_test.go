package extproc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dualmap/dualmap/scheduler"
)

// hotspotRequests are n same-size requests sharing one 2-key-block prefix
// (16-token blocks, 4,096 tokens each), so they all want the same instances.
func hotspotRequests(n, offset int) []*scheduler.Request {
	var out []*scheduler.Request
	for i := 0; i < n; i++ {
		blocks := make([]uint64, 256)
		var h uint64
		for j := range blocks {
			id := uint64(1_000_000 + j)
			if j >= 64 {
				id = uint64((offset+i+1)<<20 | j)
			}
			h = h*0x9e3779b97f4a7c15 ^ (id + 0x632be59bd9b4e019)
			h ^= h >> 29
			blocks[j] = h
		}
		out = append(out, &scheduler.Request{Blocks: blocks, Tokens: 4096})
	}
	return out
}

// migrationRun routes requests split over the replicas' schedulers, lets
// the replicas exchange load, runs coordinated rebalancing rounds, and
// returns the migrations made and the hotspot's load (all replicas) after.
func migrationRun(t *testing.T, reps []*testServer, perReplica int, leases bool) (uint64, int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, rep := range reps {
		p := rep.srv.pools.Pools()[0]
		for _, r := range hotspotRequests(perReplica, i*perReplica) {
			if _, err := p.Scheduler().(*scheduler.Scheduler).Submit(r, nil); err != nil { // queued requests stay queued
				t.Fatal(err)
			}
		}
	}
	hot := func() (string, int) { // the instance with most queued work, summed over replicas
		sum := map[string]int{}
		for _, rep := range reps {
			for _, st := range rep.srv.pools.Pools()[0].Instances() {
				sum[st.ID] += st.QueuedTokens + st.PendingTokens
			}
		}
		best, load := "", -1
		for id, l := range sum {
			if l > load {
				best, load = id, l
			}
		}
		return best, load
	}
	id, _ := hot()
	load := func(id string) int {
		n := 0
		for _, rep := range reps {
			for _, st := range rep.srv.pools.Pools()[0].Instances() {
				if st.ID == id {
					n += st.QueuedTokens + st.PendingTokens
				}
			}
		}
		return n
	}
	for round := 0; round < 6; round++ {
		// Every replica plans on the others' current load: what they
		// queued, and what the previous round moved. Without it a replica
		// would migrate on stale figures (more moves than one router).
		loadsExchanged(t, reps, fmt.Sprintf("before round %d", round))
		for _, rep := range reps {
			p := rep.srv.pools.Pools()[0]
			if leases {
				p.Coordinator().Rebalance(ctx)
			} else {
				p.Scheduler().Apply(p.Scheduler().Plan())
			}
		}
	}
	var moved uint64
	for _, rep := range reps {
		moved += rep.srv.pools.Pools()[0].Scheduler().(*scheduler.Scheduler).Stats().Migrations
	}
	return moved, load(id), id
}

// loadsExchanged waits until every replica holds the others' current load
// of every instance: for each, its Remote figures (queued requests,
// pending prefill, running) are the sum of the other replicas' own. The
// loads do not change while it waits (no ticks run), so the condition is
// reached once every replica heartbeated and read the others after the
// last change.
func loadsExchanged(t *testing.T, reps []*testServer, when string) {
	t.Helper()
	if len(reps) < 2 {
		return
	}
	bounded(t, "the replicas' loads exchanged "+when, func() string {
		own := make([]map[string]scheduler.InstanceState, len(reps))
		for i, rep := range reps {
			own[i] = map[string]scheduler.InstanceState{}
			for _, st := range rep.srv.pools.Pools()[0].Instances() {
				own[i][st.ID] = st
			}
		}
		for i := range reps {
			for id, st := range own[i] {
				var want scheduler.Load
				for j := range reps {
					if j != i {
						o := own[j][id]
						want.Queued += o.Queued
						want.PendingTokens += o.PendingTokens
						want.Running += o.Running
					}
				}
				if got := st.Remote; got.Queued != want.Queued || got.PendingTokens != want.PendingTokens || got.Running != want.Running {
					return fmt.Sprintf("replica %d sees %s's remote load as %+v, want the others' queued %d, pending %d, running %d", i, id, got, want.Queued, want.PendingTokens, want.Running)
				}
			}
		}
		return ""
	})
}

// bounded waits for cond to return "" (polling every 10 ms), failing the
// test with what it waited for and cond's last message after 30 s: a
// precondition reached in milliseconds on a quiet machine, with room for a
// loaded one.
func bounded(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 30s: %s", what, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three replicas sharing Redis shed a hotspot with about the migrations one
// router would make, not three times as many, and the hotspot ends within
// its threshold.
func TestCoordinatedMigration(t *testing.T) {
	addr := redisServer(t)
	var inst strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&inst, "      - address: 10.0.1.%d:8000\n", i+1)
	}
	// Rebalance when an instance holds over 5 s of prefill at 1e-4 s/token
	// (50,000 tokens); the cache choice may go to 4 x SLO, so the prefix
	// piles up on one instance first.
	base := "pools:\n  - per_token_seconds: 0.0001\n    candidates: 2\n    policy: {name: dualmap, params: {headroom: 4}}\n    instances:\n" + inst.String() +
		"limits: {queue_budget_tokens: 4096}\n"
	shared := base + fmt.Sprintf("state:\n  backend: redis\n  redis: {addrs: [%q], heartbeat: 50ms}\n", addr)

	// One router with all 21 requests (86,016 tokens on the hotspot: its
	// pair partner can take the excess); it runs its rebalancer through the
	// same lease path (a memory store always grants the lease).
	single := start(t, parseConfig(t, base), false)
	soloMoves, soloAfter, hotID := migrationRun(t, []*testServer{single}, 21, true)

	replicas := func(prefix string) []*testServer {
		var reps []*testServer
		for i := 0; i < 3; i++ {
			cfg := parseConfig(t, strings.Replace(shared, "heartbeat: 50ms", "heartbeat: 50ms, key_prefix: "+prefix, 1))
			// A migration lease lasts two ticks: at the harness's 10 ms a
			// stall of the machine between two replicas' turns in a round
			// (they exchange loads only between rounds) let the lease lapse
			// and the next replica migrate on stale figures (12 moves
			// against one router's 6 at load average 7-16). The ticks do not
			// run here (run is false), so a long one only lengthens the
			// lease past any such stall.
			rep := startWith(t, cfg, false, Options{TickInterval: 5 * time.Second})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			p := rep.srv.pools.Pools()[0]
			go p.Store().Run(ctx, p.Coordinator()) // load exchange without health checks (fake addresses)
			reps = append(reps, rep)
		}
		for _, rep := range reps { // each sees the two others
			rep := rep
			bounded(t, "the three replicas seeing each other", func() string {
				if n := rep.srv.pools.Pools()[0].Coordinator().Stats().Replicas; n != 2 {
					return fmt.Sprintf("a replica sees %d others, want 2", n)
				}
				return ""
			})
		}
		return reps
	}
	moves, after, _ := migrationRun(t, replicas("leased"), 7, true)
	free, _, _ := migrationRun(t, replicas("free"), 7, false)
	t.Logf("hotspot %s: one router migrated %d requests (left %d tokens); three replicas with leases %d (left %d tokens); three without leases %d",
		hotID, soloMoves, soloAfter, moves, after, free)
	if free <= moves {
		t.Errorf("without leases the replicas migrated %d, with %d: the leases make no difference here", free, moves)
	}
	if soloMoves == 0 {
		t.Fatal("no migration at all: the test does not create a hotspot")
	}
	if float64(moves) > 1.2*float64(soloMoves)+1 {
		t.Errorf("three replicas migrated %d requests, want <= 1.2 x %d", moves, soloMoves)
	}
	if soloAfter > 50000 || after > 50000 {
		t.Errorf("hotspot left with %d (one router) and %d tokens (three), want within the 50,000-token threshold", soloAfter, after)
	}
}
