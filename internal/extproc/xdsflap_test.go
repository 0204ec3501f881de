package extproc

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// applyCounter counts a pool's SetInstances calls.
type applyCounter struct {
	pool.Scheduler
	n atomic.Int64
}

func (a *applyCounter) SetInstances(list []scheduler.Instance) error {
	a.n.Add(1)
	return a.Scheduler.SetInstances(list)
}

// A hostile management server flapping between 4,096 endpoints and 2
// (issue 24): every assignment reaches the router, which ends with the
// last one's 2 instances and no series of the others on /metrics. How
// long it took, the process's CPU (the control plane's included) and how
// many applies the assignments cost are logged, not asserted.
func TestXDSFlapping4096(t *testing.T) {
	cp := startControlPlane(t)
	cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - xds: {address: %q, cluster: model_servers, node_id: router-1}
health: {interval: 1h}
`, cp.addr))
	var spy *applyCounter
	ts := startWith(t, cfg, true, Options{Wrap: func(s pool.Scheduler) pool.Scheduler {
		spy = &applyCounter{Scheduler: s}
		return spy
	}})
	p := ts.srv.pools.Pools()[0]
	big := make([]string, 4096)
	for i := range big {
		big[i] = fmt.Sprintf("10.8.%d.%d:8000", i/256, i%256)
	}
	small := []string{"10.9.0.1:8000", "10.9.0.2:8000"}
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	began := time.Now()
	const assignments = 12
	for i := range assignments {
		eps, probe, in := big, big[len(big)-1], true
		if i%2 == 1 {
			eps, in = small, false
		}
		cp.set(t, "router-1", "model_servers", eps...)
		deadline := time.Now().Add(30 * time.Second)
		for p.Member(probe) != in { // received (recorded), whether applied yet or not
			if time.Now().After(deadline) {
				t.Fatalf("assignment %d (%d endpoints) not received within 30s", i, len(eps))
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitStates(t, p, small[0]+":true:false", small[1]+":true:false")
	took := time.Since(began)
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	t.Logf("%d assignments (4,096 and 2 endpoints in turn): %v, process CPU %v, %d applies to the scheduler", assignments, took.Round(time.Millisecond), cpu.Round(time.Millisecond), spy.n.Load())

	ts.srv.pools.UpdateGauges()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "instance" {
					series++
					if v := l.GetValue(); v != small[0] && v != small[1] {
						t.Errorf("%s{instance=%q} on /metrics after the instance left", mf.GetName(), v)
					}
				}
			}
		}
	}
	if series == 0 {
		t.Errorf("no instance series on /metrics at all, want the members'")
	}
	if got := strings.Join(p.Addresses(), ","); !strings.Contains(got, small[0]) || !strings.Contains(got, small[1]) || len(p.Addresses()) != 2 {
		t.Errorf("pool addresses = %v, want %v", p.Addresses(), small)
	}
}
