package scheduler

import (
	"fmt"
	"testing"
	"time"
)

// ops reads a fuzz input one byte at a time; past its end it reads zeros.
type ops struct {
	b []byte
	i int
}

func (o *ops) more() bool { return o.i < len(o.b) }

func (o *ops) next() int {
	if o.i >= len(o.b) {
		return 0
	}
	o.i++
	return int(o.b[o.i-1])
}

// fuzzWaiter checks the decisions of queued requests as they are dispatched.
type fuzzWaiter struct{ t *testing.T }

func (w *fuzzWaiter) Dispatched(r *Request, d Decision) { checkDecision(w.t, "Dispatched", r, d) }
func (w *fuzzWaiter) Failed(*Request, error)            {}

func checkDecision(t *testing.T, what string, r *Request, d Decision) {
	t.Helper()
	if d.CachedTokens < 0 || d.CachedTokens > r.Tokens {
		t.Fatalf("%s: Decision.CachedTokens = %d for a prompt of %d tokens (%d blocks), want 0..%d", what, d.CachedTokens, r.Tokens, len(r.Blocks), r.Tokens)
	}
}

// checkLoads fails on any negative load an instance reports.
func checkLoads(t *testing.T, s *Scheduler, after string) {
	t.Helper()
	for _, st := range s.Instances() {
		if st.PendingTokens < 0 || st.QueuedTokens < 0 || st.Running < 0 || st.Queued < 0 {
			t.Fatalf("after %s: %s has pending %d, queued %d tokens in %d requests, running %d: want none negative",
				after, st.ID, st.PendingTokens, st.QueuedTokens, st.Queued, st.Running)
		}
	}
}

// FuzzSchedulerAccounting runs a random sequence of arrivals (prompts that
// share prefixes, most with a partial last block), first tokens,
// completions, cancellations, ticks, other replicas' dispatches and health
// changes through a Scheduler, and checks its accounting: a decision never
// credits more cached tokens than the prompt has, no load goes negative,
// and once every request is completed or cancelled nothing is left pending,
// running or queued.
func FuzzSchedulerAccounting(f *testing.F) {
	// Byte 0 picks the policy (Policies() order: 2 is dualmap), 1 the pool
	// size, 2 the queue budget; then operations, each an op byte and its
	// arguments (see the switch).
	f.Add([]byte{2, 2, 0, 0, 1, 2, 50, 7, 0, 1, 2, 50, 7})                            // one whole 3-block prompt, 100 tokens short, twice
	f.Add([]byte{2, 3, 1, 0, 1, 4, 7, 3, 0, 1, 4, 7, 3, 2, 3, 0, 4, 1, 5, 200})       // a queue: first token, complete, cancel, tick
	f.Add([]byte{0, 4, 2, 6, 2, 1, 4, 3, 7, 1, 0, 0, 2, 4, 9, 7, 5, 50, 2, 3, 0})     // another replica's dispatch, an instance down
	f.Add([]byte{7, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3, 0, 5, 255, 1, 3, 1, 0, 0}) // one instance, one-block prompts, a session
	f.Fuzz(func(t *testing.T, data []byte) {
		o := &ops{b: data}
		names := Policies()
		policy := names[o.next()%len(names)]
		n := 1 + o.next()%5
		budget := []int{0, 2048, 8192}[o.next()%3]
		cfg := Config{Policy: policy, Queue: QueueConfig{Budget: budget, MaxWait: 30 * time.Second}}
		s, clk := mustNew(t, cfg, n)
		ids := pool(n)
		w := &fuzzWaiter{t: t}
		var all, waiting []*Request // waiting: for their first token
		for step := 0; o.more() && step < 200; step++ {
			op := o.next() % 8
			switch op {
			case 0, 1: // an arrival: nblocks blocks under prefix p, the last short tokens short
				p, nblocks, short, shared := o.next()%4, 1+o.next()%6, o.next()*2, o.next()%8
				r := &Request{Blocks: prompt(uint64(p), uint64(len(all)), shared, nblocks)}
				r.Tokens = max(nblocks*512-short, (nblocks-1)*512+1)
				if op == 1 && p == 3 {
					r.Session = uint64(1 + len(all)%3)
				}
				d, err := s.Submit(r, w)
				if err != nil {
					continue // no instance ready, or late
				}
				checkDecision(t, "Submit", r, d)
				all = append(all, r)
				waiting = append(waiting, r)
			case 2: // the oldest request's first token
				if len(waiting) > 0 {
					s.FirstToken(waiting[0]) // nothing while it is queued
					waiting = waiting[1:]
				}
			case 3, 4: // complete or cancel one
				if len(all) > 0 {
					r := all[o.next()%len(all)]
					if op == 3 {
						s.Complete(r)
					} else {
						s.Cancel(r)
					}
				}
			case 5: // time passes
				clk.Advance(time.Duration(o.next()) * 20 * time.Millisecond)
				s.Tick()
			case 6: // another replica dispatched a prompt
				id := ids[o.next()%n].ID
				if err := s.RecordCached(id, prompt(uint64(o.next()%4), 1<<30, 2, 1+o.next()%6), time.Time{}); err != nil {
					t.Fatal(err)
				}
			case 7: // an instance goes down or comes back
				id := ids[o.next()%n].ID
				if err := s.SetHealthy(id, o.next()%2 == 0); err != nil {
					t.Fatal(err)
				}
			}
			checkLoads(t, s, fmt.Sprintf("step %d (op %d)", step, op))
		}
		for _, r := range all {
			s.FirstToken(r)
			s.Complete(r)
		}
		s.Tick()
		for _, st := range s.Instances() {
			if st.PendingTokens != 0 || st.Running != 0 || st.Queued != 0 || st.QueuedTokens != 0 {
				t.Errorf("after every request finished: %s has pending %d, running %d, queued %d (%d tokens), want all 0",
					st.ID, st.PendingTokens, st.Running, st.Queued, st.QueuedTokens)
			}
		}
	})
}
