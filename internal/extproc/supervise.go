package extproc

import (
	"context"
	"runtime/debug"
	"time"
)

// supervisorBackoff bounds the wait before a panicked background loop
// starts again: it doubles from the first value up to the second.
var supervisorBackoff = [2]time.Duration{time.Second, 30 * time.Second}

// supervise runs loop until ctx ends. A panic in loop is recovered, logged
// with its stack, counted in dualmap_errors_total{kind="panic"}, and the
// loop starts again after a backoff: a bug in health checks, DNS, engine
// metrics or the tick never takes routing down with it.
func (s *Server) supervise(ctx context.Context, name string, loop func(context.Context)) {
	wait := supervisorBackoff[0]
	for ctx.Err() == nil {
		if !s.runRecovered(ctx, name, loop) {
			return // the loop returned: ctx ended
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, supervisorBackoff[1])
	}
}

// runRecovered runs loop once and reports whether it panicked.
func (s *Server) runRecovered(ctx context.Context, name string, loop func(context.Context)) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			s.m.errors.WithLabelValues("panic").Inc()
			s.log.Error("background loop panicked; restarting it", "loop", name, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	loop(ctx)
	return false
}
