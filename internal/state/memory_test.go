package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/scheduler"
)

func TestMemory(t *testing.T) {
	s := NewMemory()
	s.Dispatched("a", []uint64{1})
	if st := s.Stats(); !st.Up || st.Published != 0 || st.Buffered != 0 {
		t.Errorf("Stats() = %+v, want up with zero counters", st)
	}
	if ok, err := s.TryLease(context.Background(), "a", time.Second); !ok || err != nil {
		t.Errorf("TryLease() = %v, %v; want true, nil", ok, err)
	}
	sched, err := scheduler.New(scheduler.Config{}, testPool(2))
	if err != nil {
		t.Fatal(err)
	}
	c, err := coord.New(s, sched, coord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, c) }()
	select {
	case err := <-done:
		t.Fatalf("Run() returned %v before ctx ended", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if err := s.Run(context.Background(), nil); !errors.Is(err, ErrNoCoordinator) {
		t.Errorf("Run(nil) = %v, want ErrNoCoordinator", err)
	}
}
