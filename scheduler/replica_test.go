package scheduler

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRemoteLoadSteersDecisions(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "least-loaded"}, 4)
	ids := pool(4)
	for i, in := range ids[:3] {
		if err := s.SetRemoteLoad(in.ID, Load{PendingTokens: 10000 * (i + 1), Running: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if d := route(t, s, req(prompt(1, 1, 0, 4))); d.Instance != ids[3].ID {
		t.Errorf("Submit() = %s, want %s (the only one without remote load)", d.Instance, ids[3].ID)
	}
	if st := state(s, ids[0].ID); st.Remote.PendingTokens != 10000 {
		t.Errorf("Remote = %+v, want 10000 pending", st.Remote)
	}
	local := map[string]Load{}
	s.LocalLoad(local)
	if l := local[ids[3].ID]; l.Running != 1 || l.PendingTokens != 2048 {
		t.Errorf("LocalLoad()[%s] = %+v, want 1 running, 2048 pending", ids[3].ID, l)
	}
	if err := s.SetRemoteLoad("x:1", Load{}); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("SetRemoteLoad(unknown) error = %v", err)
	}
	if err := s.SetRemoteLoad(ids[0].ID, Load{Running: -1}); err == nil {
		t.Error("SetRemoteLoad(negative) error = nil")
	}
}

func TestRecordCachedSharesAffinity(t *testing.T) {
	a, _ := mustNew(t, Config{}, 8)
	b, _ := mustNew(t, Config{}, 8)
	p := prompt(3, 3, 6, 8)
	da := route(t, a, req(p))
	if err := b.RecordCached(da.Instance, p, time.Time{}); err != nil {
		t.Fatal(err)
	}
	db := route(t, b, req(prompt(3, 4, 6, 8)))
	if db.Instance != da.Instance || db.CachedTokens != 6*512 {
		t.Errorf("replica b Submit() = %s with %d cached, want %s with %d", db.Instance, db.CachedTokens, da.Instance, 6*512)
	}
}

// Another replica's dispatch counts in Preble's windowed load: a cold
// request then avoids the instance the other replica just loaded.
func TestRecordCachedSharesWindowedLoad(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "preble"}, 2)
	ids := pool(2)
	if err := s.RecordCached(ids[0].ID, prompt(1, 1, 0, 8), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(prompt(2, 2, 0, 4))); d.Instance != ids[1].ID {
		t.Errorf("cold request went to %s, want %s (the other replica loaded %s with 8 blocks)", d.Instance, ids[1].ID, ids[0].ID)
	}
	if got, want := s.members[0].recentLoad(s.now(), prebleWindow), float64(8*512); got != want {
		t.Errorf("windowed load of %s = %v, want %v", ids[0].ID, got, want)
	}
	// Blocks it already held add nothing.
	if err := s.RecordCached(ids[0].ID, prompt(1, 1, 0, 8), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.members[0].recentLoad(s.now(), prebleWindow), float64(8*512); got != want {
		t.Errorf("after a repeat, windowed load = %v, want %v", got, want)
	}
	// A dispatch one window ago (history replayed after a restart) counts
	// as aged by it.
	s2, clk := mustNew(t, Config{Policy: "preble"}, 2)
	clk.Advance(time.Hour)
	if err := s2.RecordCached(ids[1].ID, prompt(1, 1, 0, 8), clk.Now().Add(-prebleWindow)); err != nil {
		t.Fatal(err)
	}
	if got, want := s2.members[1].recentLoad(s2.now(), prebleWindow), 8*512/math.E; math.Abs(got-want) > 1e-9 {
		t.Errorf("windowed load of a dispatch one window old = %v, want %v", got, want)
	}
}

func TestAnyReadyOf(t *testing.T) {
	s, _ := mustNew(t, Config{}, 3)
	ids := pool(3)
	_ = s.SetHealthy(ids[1].ID, false)
	seen := map[string]bool{}
	for n := uint64(0); n < 10; n++ {
		id, err := s.AnyReadyOf(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
	if len(seen) != 2 || seen[ids[1].ID] {
		t.Errorf("AnyReadyOf(n, nil) visited %v, want the two ready instances", seen)
	}
	empty, _ := mustNew(t, Config{}, 0)
	if _, err := empty.AnyReadyOf(0, nil); !errors.Is(err, ErrNoEndpoint) {
		t.Errorf("AnyReadyOf(0, nil) on an empty pool error = %v", err)
	}
}

func TestSessionKey(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity"}, 16)
	first := route(t, s, &Request{Blocks: prompt(1, 1, 0, 4), Tokens: 2048, Session: 42})
	for i := 0; i < 20; i++ {
		d := route(t, s, &Request{Blocks: prompt(uint64(100+i), uint64(i), 0, 4), Tokens: 2048, Session: 42})
		if d.Instance != first.Instance || d.KeyDepth != 0 {
			t.Fatalf("session request %d went to %s (depth %d), want %s", i, d.Instance, d.KeyDepth, first.Instance)
		}
	}
}

// An engine that reports a queue the router does not know about looks busy.
func TestEngineLoadSignal(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "least-loaded"}, 2)
	ids := pool(2)
	for i := 0; i < 4; i++ { // both instances learn the average request size
		r := req(prompt(uint64(i), uint64(i), 0, 4))
		route(t, s, r)
		s.FirstToken(r)
		s.Complete(r)
	}
	if err := s.SetEngineLoad(ids[0].ID, EngineLoad{Waiting: 10, Running: 4}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if d := route(t, s, req(prompt(uint64(100+i), 9, 0, 4))); d.Instance != ids[1].ID {
			t.Fatalf("Submit() = %s, want %s (the other reports 10 waiting)", d.Instance, ids[1].ID)
		}
	}
	if err := s.SetEngineLoad("x:1", EngineLoad{}); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("SetEngineLoad(unknown) = %v", err)
	}
	if err := s.SetEngineLoad(ids[0].ID, EngineLoad{Waiting: -1}); err == nil {
		t.Error("SetEngineLoad(negative) = nil")
	}
}

// With ReportedCache a dispatch does not fill the cache index: the next
// request with the same prompt sees nothing cached until AddCached.
func TestReportedCache(t *testing.T) {
	s, _ := mustNew(t, Config{ReportedCache: true, Policy: "cache-affinity"}, 8)
	p := prompt(3, 3, 6, 8)
	d1 := route(t, s, req(p))
	if d := route(t, s, req(p)); d.CachedTokens != 0 {
		t.Errorf("before AddCached: %d tokens cached on %s, want 0", d.CachedTokens, d.Instance)
	}
	if err := s.AddCached(d1.Instance, p); err != nil {
		t.Fatal(err)
	}
	if d := route(t, s, req(p)); d.Instance != d1.Instance || d.CachedTokens != 8*512 {
		t.Errorf("after AddCached: %s with %d cached, want %s with %d", d.Instance, d.CachedTokens, d1.Instance, 8*512)
	}
	if err := s.AddCached("nope", p); err == nil {
		t.Error("AddCached on an unknown instance succeeded")
	}
}

// A replica whose heartbeat claims 5,000 of everything on every instance
// (issue 24) holds every request in the router until it expires. Cut to
// RemoteBounds and counted for the others' share (SetReplicas), the claim
// leaves this replica its share of each limit the admission rule applies:
// its requests are dispatched at once.
func TestRemoteLoadLeavesOwnShare(t *testing.T) {
	claim := Load{Queued: 5000, QueuedTokens: 5000, PendingTokens: 5000, Running: 5000}
	tests := []struct {
		name string
		cfg  Config
		// teach prepares the scheduler (a learned cost of work ahead).
		teach func(s *Scheduler)
		// own is how many one-block requests this replica may then
		// dispatch at once on the instance, with two replicas.
		own int
	}{
		{"max running", Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 1 << 20, MaxRunning: 8}}, nil, 4},
		{"fixed budget", Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 4096}}, nil, 4},
		{"adaptive, step-bound engine", Config{Policy: "cache-affinity", Queue: QueueConfig{Adaptive: true}}, func(s *Scheduler) {
			teach(&s.est.ahead, 1e-4, 1e-4) // a learned 1e-4 s per token ahead: 6,250 tokens
		}, 6},
		{"adaptive, max running", Config{Policy: "cache-affinity", Queue: QueueConfig{Adaptive: true, MaxRunning: 6}}, nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bounded := range []bool{false, true} {
				s, _ := mustNew(t, tt.cfg, 1)
				if tt.teach != nil {
					tt.teach(s)
				}
				id := pool(1)[0].ID
				l := claim
				if bounded {
					b := map[string]Load{}
					s.RemoteBounds(b)
					l, _ = claim.Clamp(b[id])
					s.SetReplicas(2)
				}
				mustLoad(t, s, id, l)
				queued := 0
				for i := range tt.own + 1 {
					r := &Request{Blocks: prompt(uint64(i), uint64(i), 0, 1), Tokens: 512}
					if d := route(t, s, r); d.Queued && i < tt.own {
						queued++
					} else if !d.Queued && i == tt.own && bounded {
						t.Errorf("request %d dispatched beyond this replica's share of %d", i, tt.own)
					}
				}
				switch {
				case bounded && queued > 0:
					t.Errorf("with the claim bounded, %d of %d requests queued, want none", queued, tt.own)
				case !bounded && queued == 0:
					t.Errorf("with the claim of 5,000 counted whole, no request queued: the test no longer shows the attack")
				}
			}
		})
	}
}

// RemoteBounds is what an instance can hold: its running limit and its KV
// capacity.
func TestRemoteBounds(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want Load
	}{
		{"defaults", Config{}, Load{Queued: 256, QueuedTokens: 1_200_000, PendingTokens: 1_200_000, Running: 256}},
		{"max running", Config{Queue: QueueConfig{Budget: 1000, MaxRunning: 8}}, Load{Queued: 8, QueuedTokens: 1_200_000, PendingTokens: 1_200_000, Running: 8}},
		{"kv tokens, max seqs", Config{Cost: CostConfig{KVTokens: 40_000, MaxSeqs: 64}}, Load{Queued: 64, QueuedTokens: 40_000, PendingTokens: 40_000, Running: 64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustNew(t, tt.cfg, 2)
			got := map[string]Load{}
			s.RemoteBounds(got)
			for _, in := range pool(2) {
				if got[in.ID] != tt.want {
					t.Errorf("RemoteBounds()[%s] = %+v, want %+v", in.ID, got[in.ID], tt.want)
				}
			}
		})
	}
}

// SetReplicas below 2 counts the others' load whole again.
func TestSetReplicasOff(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 1 << 20, MaxRunning: 2}}, 1)
	id := pool(1)[0].ID
	mustLoad(t, s, id, Load{Running: 2})
	s.SetReplicas(2)
	if d := route(t, s, req(prompt(1, 1, 0, 1))); d.Queued {
		t.Fatal("with 2 replicas, the first request of this one queued behind the other's 2 running, want it dispatched (its share is 1)")
	}
	s.SetReplicas(1)
	if d := route(t, s, req(prompt(2, 2, 0, 1))); !d.Queued {
		t.Error("with SetReplicas(1), a request dispatched with 3 running on a limit of 2, want it queued")
	}
}

// The other replicas' pending prefill is in the work a request waits for,
// for the estimator's learning as for its estimate: an engine whose TTFT
// is a cost per token of all the prefill ahead teaches that cost, not one
// inflated by the share of the work the other replicas sent.
func TestLearnsCostWithRemotePendingWork(t *testing.T) {
	const truth = 0.0002 // seconds a token of prefill, the replicas' and its own
	cost := bare(CostConfig{PerToken: 0.0001})
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	id := pool(1)[0].ID
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 400 {
		remote := 1000 + rng.IntN(4000)
		if err := s.SetRemoteLoad(id, Load{PendingTokens: remote}); err != nil {
			t.Fatal(err)
		}
		r := req(prompt(uint64(i+1), uint64(i+1), 0, 1+rng.IntN(4)))
		route(t, s, r)
		clk.Advance(time.Duration(truth * float64(remote+r.Tokens) * float64(time.Second)))
		s.FirstToken(r)
		s.Complete(r)
	}
	if got := state(s, id).CostPerToken; math.Abs(got-truth)/truth > 0.05 {
		t.Errorf("learned cost %g s a token, want within 5%% of %g (the other replicas' pending work counted)", got, truth)
	}
}

// A replica that claims pending prefill it never sent (issue 24's hostile
// writer; package coord cuts each claim to RemoteBounds) now also skews
// what this replica learns: the engine's TTFT follows this replica's own
// tokens alone, so the cost learns low while the claim lasts. It stays
// positive and finite, and once the claim stops the cost is learned back.
func TestLearnedCostRecoversFromAFalseRemoteClaim(t *testing.T) {
	const truth, kv = 0.0002, 50_000
	cost := bare(CostConfig{PerToken: truth, KVTokens: kv})
	s, clk := mustNew(t, Config{Policy: "least-loaded", Cost: cost}, 1)
	id := pool(1)[0].ID
	bounds := map[string]Load{}
	s.RemoteBounds(bounds)
	claim := bounds[id].PendingTokens
	if claim != kv {
		t.Fatalf("RemoteBounds pending = %d, want the KV capacity %d", claim, kv)
	}
	serve := func(i, remote int) {
		t.Helper()
		if err := s.SetRemoteLoad(id, Load{PendingTokens: remote}); err != nil {
			t.Fatal(err)
		}
		r := req(prompt(uint64(i+1), uint64(i+1), 0, 2))
		route(t, s, r)
		clk.Advance(time.Duration(truth * float64(r.Tokens) * float64(time.Second)))
		s.FirstToken(r)
		s.Complete(r)
	}
	for i := range 300 {
		serve(i, claim)
	}
	low := state(s, id).CostPerToken
	t.Logf("cost %g s a token under the claim (truth %g)", low, truth)
	if !(low > 0) || math.IsInf(low, 0) || low >= truth {
		t.Fatalf("cost under a false claim of %d pending tokens = %g, want positive, finite and below %g", claim, low, truth)
	}
	if floor := truth * 1024 / (kv + 1024) / 2; low < floor {
		t.Errorf("cost under the claim = %g, want at least %g (no lower than the claim at its bound can teach)", low, floor)
	}
	for i := 300; i < 1000; i++ {
		serve(i, 0)
	}
	if got := state(s, id).CostPerToken; math.Abs(got-truth)/truth > 0.05 {
		t.Errorf("cost 700 requests after the claim stopped = %g, want within 5%% of %g", got, truth)
	}
}
