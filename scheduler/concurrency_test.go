package scheduler

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Requests waiting in EnqueueAndWait are cancelled, dispatched, migrated by
// the rebalancer, re-routed by health and membership changes and expired,
// all at once (run with -race): every call returns, and once every request
// is finished nothing is held anywhere.
func TestConcurrentMovesAndCancels(t *testing.T) {
	s, clk := mustNew(t, Config{
		Queue:     QueueConfig{Budget: 2048, MaxWait: 40 * time.Millisecond},
		Rebalance: RebalanceConfig{OldestWait: time.Millisecond, PendingTokens: 1024},
	}, 8)
	full := pool(8)
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(time.Millisecond)
			s.Tick()
			id := full[rng.IntN(len(full))].ID
			switch rng.IntN(6) {
			case 0:
				_ = s.SetHealthy(id, false)
			case 1:
				_ = s.SetHealthy(id, true)
			case 2:
				_ = s.SetDraining(id, rng.IntN(2) == 0)
			case 3:
				if err := s.SetInstances(full[:4+rng.IntN(5)]); err != nil {
					t.Error(err)
					return
				}
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for i := 0; i < 300; i++ {
				r := req(prompt(uint64(rng.IntN(4)), uint64(g<<20|i), 2, 2+rng.IntN(6)))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(5000))*time.Microsecond)
				_, err := s.EnqueueAndWait(ctx, r)
				cancel()
				if err != nil {
					continue // nothing held
				}
				time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // prefill
				if rng.IntN(4) != 0 {
					s.FirstToken(r)
				}
				if rng.IntN(4) == 0 {
					s.Cancel(r)
				} else {
					s.Complete(r)
				}
			}
		}(g)
	}
	// Every EnqueueAndWait returns: a bounded wait (the run takes about a
	// second; a minute is for a loaded machine), so a hang (a cancelled
	// request left queued, whose later delivery blocks on a reused waiter)
	// fails here with a message instead of at the package's timeout.
	waitWithin(t, &wg, time.Minute, "the 12 goroutines' 300 requests each")
	close(stop)
	waitWithin(t, &churn, bound, "the churn goroutine, once stopped")
	for _, in := range full {
		_ = s.SetHealthy(in.ID, true)
		_ = s.SetDraining(in.ID, false)
	}
	if err := s.SetInstances(full); err != nil {
		t.Fatal(err)
	}
	assertIdle(t, s)
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Routed == 0 || st.Dispatched == 0 || st.Cancelled == 0 {
		t.Errorf("stats = %+v, want traffic and cancellations", st)
	}
}
