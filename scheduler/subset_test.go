package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// A request restricted to a subset (Request.Only) goes only to a ready
// member of it, with every policy; none ready, or none a member, fails
// with ErrNoEndpoint.
func TestOnlySubset(t *testing.T) {
	for _, policy := range Policies() {
		t.Run(policy, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: policy}, 16)
			only := []string{"10.0.0.3:8000", "10.0.0.11:8000", "10.9.9.9:1"}
			for i := 0; i < 64; i++ {
				r := req(prompt(uint64(i%5), uint64(i), 2, 4))
				r.Only = only
				d := route(t, s, r)
				if !slices.Contains(only, d.Instance) {
					t.Fatalf("request %d went to %s, outside %v", i, d.Instance, only)
				}
				s.FirstToken(r)
				s.Complete(r)
			}
			if err := s.SetHealthy("10.0.0.3:8000", false); err != nil {
				t.Fatal(err)
			}
			// Unready members of the subset are not offered: Pick (which
			// does not retry) says so at once, and a Submit that tried one
			// would loop (an instance not accepting), caught by the bound.
			r := req(prompt(1, 1000, 2, 4))
			r.Only = only
			if d, err := s.Pick(r); err != nil || d.Instance != "10.0.0.11:8000" {
				t.Fatalf("with 10.0.0.3 down, Pick() = %s, %v; want 10.0.0.11:8000", d.Instance, err)
			}
			if d, err := submitWithin(t, s, r, recorder(s), "a request whose subset has one ready member"); err != nil || d.Instance != "10.0.0.11:8000" {
				t.Errorf("with 10.0.0.3 down, went to %s (error %v), want 10.0.0.11:8000", d.Instance, err)
			}
			s.SetHealthy("10.0.0.11:8000", false)
			r = req(prompt(1, 1001, 2, 4))
			r.Only = only
			if d, err := s.Pick(r); !errors.Is(err, ErrNoEndpoint) {
				t.Fatalf("Pick() with no ready member in the subset = %s, %v; want ErrNoEndpoint", d.Instance, err)
			}
			if _, err := submitWithin(t, s, r, nil, "a request whose subset has no ready member"); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("Submit() with no ready member in the subset error = %v, want ErrNoEndpoint", err)
			}
			r = req(prompt(1, 1002, 2, 4))
			r.Only = []string{"192.168.0.1:80"}
			if _, err := s.Pick(r); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("Pick() with a subset of strangers error = %v, want ErrNoEndpoint", err)
			}
			if _, err := s.AnyReadyOf(7, []string{"10.0.0.11:8000"}); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("AnyReadyOf() of an unhealthy subset error = %v, want ErrNoEndpoint", err)
			}
			if id, err := s.AnyReadyOf(7, []string{"10.0.0.5:8000", "x"}); err != nil || id != "10.0.0.5:8000" {
				t.Errorf("AnyReadyOf() = %q, %v; want 10.0.0.5:8000", id, err)
			}
		})
	}
}

// Data-parallel pools: one address with several ports is several
// instances, and a subset names them by port.
func TestOnlySubsetPorts(t *testing.T) {
	var list []Instance
	for port := 8000; port < 8004; port++ {
		list = append(list, Instance{ID: fmt.Sprintf("10.1.1.1:%d", port)}, Instance{ID: fmt.Sprintf("10.1.1.2:%d", port)})
	}
	s, err := New(Config{}, list)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		r := req(prompt(uint64(i), uint64(i), 1, 2))
		d := route(t, s, r)
		seen[d.Instance] = true
		s.Complete(r)
	}
	if len(seen) < 6 {
		t.Errorf("requests spread over %d of 8 ip:port instances, want most of them", len(seen))
	}
	only := []string{"10.1.1.1:8002", "10.1.1.1:8003"}
	for i := 0; i < 50; i++ {
		r := req(prompt(uint64(i), uint64(i+500), 1, 2))
		r.Only = only
		if d := route(t, s, r); !slices.Contains(only, d.Instance) {
			t.Fatalf("went to %s, outside %v", d.Instance, only)
		}
		s.Complete(r)
	}
}

// A restricted request that waits in a router queue is never migrated or
// re-routed out of its subset: the neighbour move the rebalancer would
// make for a hotspot is not offered, and when the instance goes down its
// queue fails instead of moving.
func TestOnlySubsetRebalance(t *testing.T) {
	cfg := Config{
		Cost:      CostConfig{PerToken: 1e-4, LearnRate: -1},
		Params:    Params{"headroom": 4.0},
		Queue:     QueueConfig{Budget: 4096},
		Rebalance: RebalanceConfig{OldestWait: -1, Neighbor: true},
	}
	s, _ := mustNew(t, cfg, 8)
	only := []string{"10.0.0.3:8000"}
	var reqs []*Request
	for i := 0; i < 40; i++ {
		r := req(prompt(42, uint64(i), 2, 8))
		r.Only = only
		route(t, s, r)
		reqs = append(reqs, r)
	}
	if st := state(s, only[0]); st.Queued < 30 {
		t.Fatalf("%s has %d queued, want a hotspot", only[0], st.Queued)
	}
	if moves := s.Plan(); len(moves) != 0 {
		t.Fatalf("Plan() = %d moves (first %s->%s) for requests restricted to %v", len(moves), moves[0].From, moves[0].To, only)
	}
	out := recorder(s)
	out.take()
	s.SetHealthy(only[0], false)
	if got := out.take(); len(got) != 0 {
		t.Fatalf("%d queued requests dispatched elsewhere (first to %s)", len(got), got[0].Decision.Instance)
	}
	for _, r := range reqs {
		if in := r.dec.Instance; in != only[0] {
			t.Fatalf("request moved to %s, outside %v", in, only)
		}
	}
}

// The restriction does not allocate once the request has its mask.
func TestOnlySubsetAllocs(t *testing.T) {
	s, _ := mustNew(t, Config{}, 64)
	r := req(prompt(1, 1, 2, 4))
	r.Only = []string{"10.0.0.9:8000", "10.0.0.33:8000"}
	if _, err := s.Pick(r); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = s.Pick(r) }); n != 0 {
		t.Errorf("Pick() with a subset = %g allocs, want 0", n)
	}
}

// Higher Request.Priority is dispatched first from a router queue; a
// sheddable request (negative priority) fails with ErrShed instead of
// waiting, and is dispatched when it does not have to wait.
func TestPriorityQueue(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "least-loaded", Queue: QueueConfig{Budget: 100}}, 1)
	out := recorder(s)
	hold := req(prompt(1, 1, 0, 4))
	route(t, s, hold)
	shed := req(prompt(2, 2, 0, 4))
	shed.Priority = -1
	if _, err := s.Submit(shed, out); !errors.Is(err, ErrShed) {
		t.Fatalf("sheddable Submit() error = %v, want ErrShed", err)
	}
	low := req(prompt(3, 3, 0, 4))
	high := req(prompt(4, 4, 0, 4))
	high.Priority = 5
	for _, r := range []*Request{low, high} {
		if d := route(t, s, r); !d.Queued {
			t.Fatalf("request not queued behind the budget")
		}
	}
	out.take()
	s.FirstToken(hold)
	s.Complete(hold)
	got := out.take()
	if len(got) == 0 || got[0].Request != high {
		t.Fatalf("dispatched first: %v, want the high-priority request", got)
	}
	if st := state(s, "10.0.0.0:8000"); st.Queued+st.Running == 0 {
		t.Fatal("nothing left on the instance")
	}
	idle, _ := mustNew(t, Config{Queue: QueueConfig{Budget: 100}}, 2)
	ok := req(prompt(5, 5, 0, 4))
	ok.Priority = -3
	if d, err := idle.Submit(ok, nil); err != nil || d.Queued {
		t.Fatalf("sheddable Submit() on an idle pool = %v, %v; want dispatched", d, err)
	}
}
