package scheduler

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LocalLoad and instance.ahead, read without the instance lock while
// another goroutine queues and withdraws late requests under it, never see
// a negative on-time queue (they once read queued and late tokens as two
// atomics, and the difference was seen at -2048).
func TestOnTimeLoadNeverNegative(t *testing.T) {
	s, _ := mustNew(t, Config{Queue: QueueConfig{Budget: 1}}, 1)
	in := s.members[0]
	// Other replicas' running requests make the instance not idle, so late
	// requests wait, and nothing is pending: ahead() = queued - late.
	if err := s.SetRemoteLoad(in.ID, Load{Running: 100}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var negLocal, negAhead atomic.Int64
	var minSeen atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if a := in.ahead(); a < 0 {
				negAhead.Add(1)
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		m := map[string]Load{}
		for !stop.Load() {
			s.LocalLoad(m)
			if q := m[in.ID].QueuedTokens; q < 0 {
				negLocal.Add(1)
				if int64(q) < minSeen.Load() {
					minSeen.Store(int64(q))
				}
			}
			if in.ahead() < 0 {
				negAhead.Add(1)
			}
		}
	}()
	deadline := time.Now().Add(500 * time.Millisecond)
	for i := uint64(0); time.Now().Before(deadline) && negLocal.Load()+negAhead.Load() < 50; i++ {
		r := req(prompt(2, 100+i, 1, 4))
		r.SLO = time.Nanosecond // late on arrival: counted in lateTokens
		d, err := s.Submit(r, nil)
		if err != nil || !d.Queued {
			t.Fatalf("late request not queued: %+v %v", d, err)
		}
		s.Cancel(r)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("negative LocalLoad.QueuedTokens seen %d times (min %d); negative ahead() %d times", negLocal.Load(), minSeen.Load(), negAhead.Load())
	if negLocal.Load() > 0 || negAhead.Load() > 0 {
		t.Errorf("torn read: LocalLoad reported negative QueuedTokens / ahead() < 0")
	}
}
