package state

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentDispatched calls Dispatched from many goroutines (and
// Stats, as a metrics scraper would) while Run publishes; run with -race.
// The buffer's bound is far above the 8,000 records, so none is dropped:
// every record is published or coalesced with its twin (workers send their
// prompts in pairs, so at most half coalesce), and the other replica
// applies every published one.
func TestConcurrentDispatched(t *testing.T) {
	const (
		workers = 16
		each    = 500
	)
	addr, _, _ := startRedis(t)
	a := newReplica(t, addr, "a", nil)
	b := newReplica(t, addr, "b", nil)
	ids := testPool(8)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				// Workers share prompts pairwise, so some records coalesce.
				p := testPrompt(uint64(w/2*each+i+1), 4+i%8)
				a.store.Dispatched(ids[(w/2+i)%len(ids)].ID, p)
				if i%100 == 0 {
					_ = a.store.Stats()
				}
			}
		})
	}
	stopScrape := make(chan struct{})
	var scrape sync.WaitGroup
	scrape.Go(func() {
		for {
			select {
			case <-stopScrape:
				return
			case <-time.After(time.Millisecond):
				_ = b.store.Stats()
			}
		}
	})
	wg.Wait()
	close(stopScrape)
	scrape.Wait()
	eventually(t, time.Minute, func() string { // a few flushes and reads on a quiet machine; 7 s seen under -race on a loaded one
		st := a.store.Stats()
		if st.Dropped != 0 {
			return fmt.Sprintf("a: Dropped = %d, want 0 (the buffer holds %d cost units)", st.Dropped, DefaultBuffer)
		}
		if got := st.Published + st.Coalesced; got != workers*each {
			return fmt.Sprintf("a: Published+Coalesced = %d+%d, want %d", st.Published, st.Coalesced, workers*each)
		}
		if st.Published < workers*each/2 {
			return fmt.Sprintf("a: Published = %d, want >= %d (only twins coalesce)", st.Published, workers*each/2)
		}
		if bs := b.coord.Stats(); bs.Applied != st.Published {
			return fmt.Sprintf("b: coord Stats().Applied = %d, want a's Published %d", bs.Applied, st.Published)
		}
		return ""
	})
	st := a.store.Stats()
	t.Logf("a: published %d, coalesced %d, dropped %d in %d entries", st.Published, st.Coalesced, st.Dropped, st.Batches)
}

// TestRunMisuse: Run refuses a nil Coordinator and a second concurrent run.
func TestRunMisuse(t *testing.T) {
	addr, _, _ := startRedis(t)
	r := newReplica(t, addr, "a", nil)
	eventually(t, time.Second, func() string {
		if !r.store.running.Load() {
			return "Run has not started"
		}
		return ""
	})
	if err := r.store.Run(t.Context(), r.coord); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run() = %v, want ErrRunning", err)
	}
	if err := r.store.Run(t.Context(), nil); !errors.Is(err, ErrNoCoordinator) {
		t.Errorf("Run(nil) = %v, want ErrNoCoordinator", err)
	}
}
