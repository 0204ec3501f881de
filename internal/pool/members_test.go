package pool

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/xds"
	"github.com/dualmap/dualmap/scheduler"
)

// flushMembers applies a scheduled change at once as if the delay had passed.
func (p *Pool) flushMembers() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
		p.applyMembers(time.Now())
	}
}

// countingScheduler counts SetInstances calls.
type countingScheduler struct {
	Scheduler
	sets atomic.Int64
}

func (c *countingScheduler) SetInstances(list []scheduler.Instance) error {
	c.sets.Add(1)
	return c.Scheduler.SetInstances(list)
}

// endpoints are n xDS endpoints 10.1.x.y:8000 from the first-th on.
func endpoints(first, n int) []xds.Endpoint {
	eps := make([]xds.Endpoint, n)
	for i := range eps {
		k := first + i
		eps[i] = xds.Endpoint{Address: fmt.Sprintf("10.1.%d.%d:8000", k/256, k%256), Weight: 1}
	}
	return eps
}

func memberIDs(p *Pool) []string {
	var ids []string
	for _, st := range p.Instances() {
		ids = append(ids, st.ID)
	}
	slices.Sort(ids)
	return ids
}

func addrs(eps []xds.Endpoint) []string {
	var ids []string
	for _, e := range eps {
		ids = append(ids, e.Address)
	}
	slices.Sort(ids)
	return ids
}

// A burst of assignments (a management server flapping between 4,096
// endpoints and 2) applies its first at once and then only its last; a
// probe's verdict on an endpoint not applied yet is kept and applied with
// it; an assignment the scheduler would refuse is refused at once.
func TestMembershipBurstCoalesced(t *testing.T) {
	var spy *countingScheduler
	m := startManager(t, parseConfig(t, xdsOnly), false, Options{
		MembershipDelay: time.Hour, // nothing trails on its own: flushMembers stands for the delay
		Wrap: func(s Scheduler) Scheduler {
			spy = &countingScheduler{Scheduler: s}
			return spy
		},
	})
	p := m.Pools()[0]
	first := endpoints(0, 2)
	if err := p.setXDS(first); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(p); !slices.Equal(got, addrs(first)) || spy.sets.Load() != 1 {
		t.Fatalf("after the first assignment: members %v, %d applies; want %v at once, 1 apply", got, spy.sets.Load(), addrs(first))
	}
	for i := range 12 {
		eps := endpoints(0, 4096)
		if i%2 == 1 {
			eps = endpoints(100, 2)
		}
		if err := p.setXDS(eps); err != nil {
			t.Fatal(err)
		}
	}
	last := endpoints(7, 3)
	if err := p.setXDS(last); err != nil {
		t.Fatal(err)
	}
	if err := p.setXDS([]xds.Endpoint{{Address: ""}}); err == nil {
		t.Error("setXDS(an endpoint without an address) = nil, want the scheduler's refusal")
	}
	p.Health(last[0].Address, false) // not a member yet
	if n := spy.sets.Load(); n != 1 {
		t.Errorf("%d applies during the burst, want none after the first", n)
	}
	p.flushMembers()
	if got := memberIDs(p); !slices.Equal(got, addrs(last)) {
		t.Errorf("members after the burst = %v, want the last assignment's %v", got, addrs(last))
	}
	if n := spy.sets.Load(); n != 2 {
		t.Errorf("%d applies for a burst of 14 assignments, want 2 (the first and the last)", n)
	}
	for _, st := range p.Instances() {
		if want := st.ID != last[0].Address; st.Healthy != want {
			t.Errorf("instance %s healthy = %v, want %v (the probe's verdict, given before it was applied)", st.ID, st.Healthy, want)
		}
	}
}

// Resolved addresses (DNS) and reloaded static lists take the same path:
// a burst of them applies its first at once and then only its last.
func TestMembershipDNSAndReloadCoalesced(t *testing.T) {
	var spy *countingScheduler
	m := startManager(t, parseConfig(t, xdsOnly), false, Options{
		MembershipDelay: time.Hour,
		Wrap: func(s Scheduler) Scheduler {
			spy = &countingScheduler{Scheduler: s}
			return spy
		},
	})
	p := m.Pools()[0]
	for i := range 10 {
		addrs := addrs(endpoints(i*10, 3))
		if err := p.setMembers(nil, &addrs); err != nil {
			t.Fatal(err)
		}
	}
	static := []config.Instance{{Address: "10.2.0.1:8000", Weight: 2}}
	if err := p.setMembers(&static, nil); err != nil {
		t.Fatal(err)
	}
	if n := spy.sets.Load(); n != 1 {
		t.Errorf("%d applies during the burst, want 1 (its first)", n)
	}
	p.flushMembers()
	want := append(addrs(endpoints(90, 3)), "10.2.0.1:8000")
	slices.Sort(want)
	if got := memberIDs(p); !slices.Equal(got, want) || spy.sets.Load() != 2 {
		t.Errorf("after the burst: members %v in %d applies, want %v in 2", got, spy.sets.Load(), want)
	}
}

// The change that waits is applied once the delay since the last apply
// has passed, without any further event.
func TestMembershipTrailingApply(t *testing.T) {
	m := startManager(t, parseConfig(t, xdsOnly), false, Options{MembershipDelay: 20 * time.Millisecond})
	p := m.Pools()[0]
	if err := p.setXDS(endpoints(0, 2)); err != nil {
		t.Fatal(err)
	}
	want := endpoints(50, 5)
	if err := p.setXDS(want); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(memberIDs(p), addrs(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("members = %v 10s after the last assignment, want %v", memberIDs(p), addrs(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// xdsOnly is a pool whose instances come from xDS alone (a management
// server that is never dialled: the tests call setXDS).
const xdsOnly = "pools:\n  - xds: {address: 127.0.0.1:1, cluster: c}\n"
