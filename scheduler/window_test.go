package scheduler

import (
	"testing"
	"time"
)

// Two Submits take their clock readings before they queue for the instance
// lock; the later reading can get the lock first. addRecentLocked then
// stores the earlier time, moving the window's clock backwards.
func TestWindowClockNeverGoesBack(t *testing.T) {
	var in instance
	in.addRecentLocked(100*time.Second, 1000) // goroutine B (read the clock later, locked first)
	in.addRecentLocked(40*time.Second, 1000)  // goroutine A (read the clock 60s earlier, locked second)
	_, at := in.recent.load()
	got := in.recentLoad(100*time.Second, prebleWindow)
	t.Logf("window time after both = %v; load at 100s = %.1f (want 2000)", at, got)
	if at != 100*time.Second {
		t.Errorf("window clock went back to %v", at)
	}
}
