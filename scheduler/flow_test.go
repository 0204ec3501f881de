package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"
)

// idle reports whether every instance holds nothing: no queue, no pending
// prefill, nothing running.
func assertIdle(t *testing.T, s *Scheduler) {
	t.Helper()
	for _, st := range s.Instances() {
		if st.Queued != 0 || st.QueuedTokens != 0 || st.PendingTokens != 0 || st.Running != 0 {
			t.Errorf("instance %s = %+v, want nothing held", st.ID, st)
		}
	}
}

// waitQueued waits until n requests wait in s's router queues.
func waitQueued(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.QueueLen() != n {
		if time.Now().After(deadline) {
			t.Fatalf("QueueLen() = %d, want %d", s.QueueLen(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEnqueueAndWaitDispatchesAtOnce(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	r := req(prompt(1, 1, 0, 4))
	d, err := s.EnqueueAndWait(context.Background(), r)
	if err != nil || d.Queued || d.Instance != pool(1)[0].ID {
		t.Fatalf("EnqueueAndWait() = %+v, %v; want dispatched to %s", d, err, pool(1)[0].ID)
	}
	s.Complete(r)
	assertIdle(t, s)
}

func TestEnqueueAndWaitBlocksUntilDispatched(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	first := req(prompt(1, 1, 0, 4))
	if _, err := s.EnqueueAndWait(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	type res struct {
		d   Decision
		err error
	}
	done := make(chan res, 1)
	second := req(prompt(2, 2, 0, 4))
	go func() {
		d, err := s.EnqueueAndWait(context.Background(), second)
		done <- res{d, err}
	}()
	waitQueued(t, s, 1)
	select {
	case r := <-done:
		t.Fatalf("EnqueueAndWait() returned %+v while the budget is full", r)
	default:
	}
	s.FirstToken(first) // pending prefill drains: the waiter is dispatched
	r := <-done
	if r.err != nil || r.d.Queued || r.d.Instance == "" {
		t.Fatalf("EnqueueAndWait() = %+v, %v; want dispatched", r.d, r.err)
	}
	s.Complete(first)
	s.Complete(second)
	assertIdle(t, s)
}

func TestEnqueueAndWaitCancelledReleasesEverything(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	first := req(prompt(1, 1, 0, 4))
	if _, err := s.EnqueueAndWait(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.EnqueueAndWait(ctx, req(prompt(2, 2, 0, 4)))
		done <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("EnqueueAndWait() error = %v, want context.Canceled", err)
	}
	if n := s.QueueLen(); n != 0 {
		t.Errorf("QueueLen() after cancel = %d, want 0", n)
	}
	s.Complete(first)
	assertIdle(t, s)
	if st := s.Stats(); st.Cancelled != 1 || st.Completed != 1 {
		t.Errorf("Stats() = %+v, want 1 cancelled and 1 completed", st)
	}
}

func TestEnqueueAndWaitShed(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		shed func(s *Scheduler, clk *fakeClock)
		want error
	}{
		{
			name: "queue timeout",
			cfg:  Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100, MaxWait: time.Second}},
			shed: func(s *Scheduler, clk *fakeClock) { clk.Advance(2 * time.Second); s.Tick() },
			want: ErrQueueTimeout,
		},
		{
			name: "instance removed",
			cfg:  Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}},
			shed: func(s *Scheduler, _ *fakeClock) { _ = s.SetInstances(nil) },
			want: ErrNoEndpoint,
		},
		{
			name: "late",
			cfg:  Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100, Late: LateReject}},
			shed: func(s *Scheduler, clk *fakeClock) { clk.Advance(time.Minute); s.Tick() },
			want: ErrLate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := mustNew(t, tt.cfg, 1)
			first := req(prompt(1, 1, 0, 4))
			if _, err := s.EnqueueAndWait(context.Background(), first); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := s.EnqueueAndWait(context.Background(), req(prompt(2, 2, 0, 4)))
				done <- err
			}()
			waitQueued(t, s, 1)
			tt.shed(s, clk)
			if err := <-done; !errors.Is(err, tt.want) {
				t.Fatalf("EnqueueAndWait() error = %v, want %v", err, tt.want)
			}
			if n := s.QueueLen(); n != 0 {
				t.Errorf("QueueLen() after shedding = %d, want 0", n)
			}
			s.Complete(first)
			assertIdle(t, s)
		})
	}
}

// A request dispatched in the instant its context ends is released by the
// cancellation: nothing leaks, whichever way the race goes.
func TestEnqueueAndWaitCancelRace(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	for i := 0; i < 200; i++ {
		first := req(prompt(1, uint64(i), 0, 4))
		if _, err := s.EnqueueAndWait(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		second := req(prompt(2, uint64(i), 0, 4))
		done := make(chan error, 1)
		go func() {
			_, err := s.EnqueueAndWait(ctx, second)
			done <- err
		}()
		waitQueued(t, s, 1)
		go s.FirstToken(first) // dispatches second, racing the cancel
		cancel()
		if err := <-done; err == nil {
			s.Complete(second)
		}
		s.Complete(first)
		assertIdle(t, s)
	}
}
