package sim

import "github.com/dualmap/dualmap/scheduler"

// coordScheduler is a replica's scheduler as its Coordinator drives it:
// Apply takes no Outcome, so this one runs the scheduler's Apply with the
// cluster's and hands the migrations it dispatched to the engines. Delete
// it once Scheduler.Apply(moves) int lands.
type coordScheduler struct {
	*scheduler.Scheduler
	c *cluster
}

func (s coordScheduler) Apply(moves []scheduler.Move) int {
	n := s.Scheduler.Apply(moves, &s.c.out)
	s.c.handle(s.Scheduler)
	return n
}
