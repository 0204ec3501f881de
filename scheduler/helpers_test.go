package scheduler

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeClock is an injected clock the tests advance by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// pool returns n instances named 10.0.0.i:8000.
func pool(n int) []Instance {
	list := make([]Instance, n)
	for i := range list {
		list[i] = Instance{ID: fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)}
	}
	return list
}

// prompt returns a prompt of nblocks chained blocks whose first shared
// blocks come from prefix id p and the rest from unique id u.
func prompt(p, u uint64, shared, nblocks int) []uint64 {
	b := make([]uint64, nblocks)
	var h uint64
	for i := range b {
		id := u<<20 | uint64(i)
		if i < shared {
			id = p<<40 | uint64(i)
		}
		h = ChainHash(h, id)
		b[i] = h
	}
	return b
}

func req(blocks []uint64) *Request {
	return &Request{Blocks: blocks, Tokens: len(blocks) * 512}
}

func mustNew(t testing.TB, cfg Config, n int) (*Scheduler, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	cfg.Now = clk.Now
	s, err := New(cfg, pool(n))
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return s, clk
}

func route(t testing.TB, s *Scheduler, r *Request) Decision {
	t.Helper()
	d, err := s.Submit(r, recorder(s))
	if err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	return d
}

// estimated is Pick's estimated TTFT for r (Pick changes nothing).
func estimated(t testing.TB, s *Scheduler, r *Request) time.Duration {
	t.Helper()
	d, err := s.Pick(r)
	if err != nil {
		t.Fatalf("Pick() error = %v", err)
	}
	return d.EstimatedTTFT
}

func state(s *Scheduler, id string) InstanceState {
	for _, st := range s.Instances() {
		if st.ID == id {
			return st
		}
	}
	return InstanceState{}
}

// outcome records what the Scheduler tells the waiters of queued requests
// (requests submitted with it as their Waiter). Safe for concurrent use
// through take; the fields are for single-goroutine tests.
type outcome struct {
	mu     sync.Mutex
	sent   []dispatch
	failed []failure
}

type dispatch struct {
	Request  *Request
	Decision Decision
}

type failure struct {
	Request *Request
	Err     error
}

func (o *outcome) Dispatched(r *Request, d Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, dispatch{r, d})
}

func (o *outcome) Failed(r *Request, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed = append(o.failed, failure{r, err})
}

func (o *outcome) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent, o.failed = nil, nil
}

// take returns and forgets what was dispatched so far.
func (o *outcome) take() []dispatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.sent
	o.sent = nil
	return d
}

var (
	recordersMu sync.Mutex
	recorders   = map[*Scheduler]*outcome{}
)

// recorder is the outcome that route gives as the Waiter of every request
// it submits to s.
func recorder(s *Scheduler) *outcome {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	o := recorders[s]
	if o == nil {
		o = new(outcome)
		recorders[s] = o
	}
	return o
}

// bound is how long a call that should return at once may take before a
// test reports it as hung (a loop that never ends, a wait never woken):
// far beyond any real run, however loaded the machine, and far below the
// package's timeout, so a hang fails with a message that names it.
const bound = 10 * time.Second

// submitWithin is Submit(r, w), failing the test if it has not returned
// within bound. A Submit that never returns is left running.
func submitWithin(t testing.TB, s *Scheduler, r *Request, w Waiter, what string) (Decision, error) {
	t.Helper()
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := s.Submit(r, w)
		done <- result{d, err}
	}()
	select {
	case res := <-done:
		return res.d, res.err
	case <-time.After(bound):
		t.Fatalf("Submit() of %s did not return within %v (a placement loop that never ends?)", what, bound)
		return Decision{}, nil
	}
}

// recv waits for a value from ch, failing the test with what it waited
// for if none comes within bound.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound):
		t.Fatalf("%s did not happen within %v", what, bound)
		var zero T
		return zero
	}
}

// waitWithin waits for wg, failing the test with what it waited for if the
// group is not done within d.
func waitWithin(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v (a call that never returns, or a delivery blocked on a full waiter?)", what, d)
	}
}
