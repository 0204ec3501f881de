package state

import "github.com/dualmap/dualmap/scheduler"

// coordScheduler lets the test replicas hand a *scheduler.Scheduler to
// coord.New while the scheduler's Apply still takes an Outcome (these
// tests never rebalance, so nothing is waiting for it). Delete it once
// Apply(moves) int lands.
type coordScheduler struct{ *scheduler.Scheduler }

func (s coordScheduler) Apply(moves []scheduler.Move) int {
	var out scheduler.Outcome
	return s.Scheduler.Apply(moves, &out)
}
