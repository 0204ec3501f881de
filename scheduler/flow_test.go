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
	r := recv(t, done, "the queued request's dispatch after the first token drained the queue")
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
	if err := recv(t, done, "EnqueueAndWait() returning after its context was cancelled"); !errors.Is(err, context.Canceled) {
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
			if err := recv(t, done, "EnqueueAndWait() returning once its request was shed ("+tt.name+")"); !errors.Is(err, tt.want) {
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
		if err := recv(t, done, "EnqueueAndWait() returning after a cancel racing its dispatch"); err == nil {
			s.Complete(second)
		}
		s.Complete(first)
		assertIdle(t, s)
	}
}

// hookCtx is a context already cancelled whose Done runs hook first (once):
// EnqueueAndWait calls Done after Submit queued the request, right before
// it selects, so the hook can deliver the request's decision there and
// both of the select's cases are ready when it runs.
type hookCtx struct {
	context.Context
	hook func()
	done chan struct{}
}

func newHookCtx(hook func()) *hookCtx {
	c := &hookCtx{Context: context.Background(), hook: hook, done: make(chan struct{})}
	close(c.done)
	return c
}

func (c *hookCtx) Done() <-chan struct{} {
	if h := c.hook; h != nil {
		c.hook = nil
		h()
	}
	return c.done
}

func (c *hookCtx) Err() error { return context.Canceled }

// A pooled waiter reused after a cancellation that raced a delivery never
// hands the stale decision to the next request: a request that has not
// been dispatched never returns a decision. Each round delivers the
// decision of a queued request in the instant its context ends (both
// select cases ready, the select picks one at random), then asks the pool
// for the next request, which must queue. Pins EnqueueAndWait's emptying
// of the channel after Cancel (left out, the next request that takes the
// waiter returns the earlier request's decision while it still waits).
func TestEnqueueAndWaitReusedWaiterNotStale(t *testing.T) {
	s, _ := mustNew(t, Config{Policy: "cache-affinity", Queue: QueueConfig{Budget: 100}}, 1)
	raced := 0
	for i := 0; i < 200; i++ {
		first := req(prompt(0, uint64(4*i), 0, 4)) // four distinct prompts a round
		if _, err := s.EnqueueAndWait(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		second := req(prompt(0, uint64(4*i+1), 0, 4))
		ctx := newHookCtx(func() {
			if st := second.state; st != stateQueued {
				t.Fatalf("round %d: the second request is in state %v when EnqueueAndWait selects, want queued", i, st)
			}
			s.FirstToken(first) // drains the queue: second's decision is delivered now
		})
		d, err := s.EnqueueAndWait(ctx, second)
		switch {
		case errors.Is(err, context.Canceled):
			raced++ // the cancellation won: second was released, its decision is stale
		case err != nil:
			t.Fatalf("round %d: EnqueueAndWait() error = %v", i, err)
		default:
			if d.Instance == "" || second.state != stateDispatched {
				t.Fatalf("round %d: EnqueueAndWait() = %+v with the request in state %v, want it dispatched", i, d, second.state)
			}
			s.Complete(second)
		}
		// The next request queues behind blocker's prefill and is never
		// dispatched: its context is already cancelled, so the only
		// right outcome is context.Canceled.
		blocker := req(prompt(0, uint64(4*i+2), 0, 4))
		if d, err := s.EnqueueAndWait(context.Background(), blocker); err != nil || d.Queued {
			t.Fatalf("round %d: blocker = %+v, %v; want dispatched at once", i, d, err)
		}
		third := req(prompt(0, uint64(4*i+3), 0, 4))
		if d, err := s.EnqueueAndWait(newHookCtx(nil), third); err == nil {
			t.Fatalf("round %d: EnqueueAndWait() of a request that was never dispatched returned %+v (instance %s, %d cached tokens), want context.Canceled: a stale decision from the pooled waiter", i, d, d.Instance, d.CachedTokens)
		}
		s.Complete(blocker)
		s.Complete(first)
		assertIdle(t, s)
	}
	if raced == 0 {
		t.Fatal("the cancellation never won the select in 200 rounds: the race this test is for did not happen")
	}
	t.Logf("%d of 200 rounds cancelled with a decision delivered", raced)
}
