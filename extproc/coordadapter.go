package extproc

import "github.com/dualmap/dualmap/scheduler"

// coordScheduler is a pool's scheduler as the Coordinator drives it: Apply
// takes no Outcome, so this one runs the scheduler's Apply through the
// server's shared Outcome and delivers what the migrations dispatched to
// the streams waiting for them. Delete it once Scheduler.Apply(moves) int
// lands: the scheduler is then a coord.Scheduler itself.
type coordScheduler struct {
	router
	background func(func(out *scheduler.Outcome))
}

func (c coordScheduler) Apply(moves []scheduler.Move) int {
	n := 0
	c.background(func(out *scheduler.Outcome) { n = c.router.Apply(moves, out) })
	return n
}
