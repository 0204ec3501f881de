package pool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A background loop that panics is restarted (after a backoff) and every
// panic is counted; the supervisor returns when its context ends.
func TestSupervisedLoopSurvivesPanics(t *testing.T) {
	saved := supervisorBackoff
	supervisorBackoff = [2]time.Duration{time.Millisecond, 2 * time.Millisecond}
	t.Cleanup(func() { supervisorBackoff = saved })
	var panics atomic.Int32
	s := startManager(t, parseConfig(t, fourInstances), false, Options{Panicked: func(string) { panics.Add(1) }})
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.supervise(ctx, "test", func(ctx context.Context) {
			if runs.Add(1) <= 3 {
				panic("injected")
			}
			<-ctx.Done()
		})
	}()
	waitFor(t, "the fourth run of the loop", func() bool { return runs.Load() >= 4 })
	if got := panics.Load(); got != 3 {
		t.Errorf("panics counted = %v, want 3", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("supervise did not return after its context ended")
	}
	if n := runs.Load(); n != 4 {
		t.Errorf("loop ran %d times, want 4 (3 panics, then until ctx ended)", n)
	}
}
