package pool

import (
	"context"
	"runtime/debug"
	"time"
)

// supervisorBackoff bounds the wait before a panicked background loop
// starts again: it doubles from the first value up to the second.
var supervisorBackoff = [2]time.Duration{time.Second, 30 * time.Second}

// supervise runs loop until ctx ends. A panic in loop is recovered, logged
// with its stack, told to Options.Panicked, and the
// loop starts again after a backoff: a bug in health checks, DNS, engine
// metrics or the tick never takes routing down with it.
func (m *Manager) supervise(ctx context.Context, name string, loop func(context.Context)) {
	wait := supervisorBackoff[0]
	for ctx.Err() == nil {
		if !m.runRecovered(ctx, name, loop) {
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
func (m *Manager) runRecovered(ctx context.Context, name string, loop func(context.Context)) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			m.panicked(name)
			m.log.Error("background loop panicked; restarting it", "loop", name, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	loop(ctx)
	return false
}
