package httpengine

import (
	"context"
	"math"
	"time"

	"github.com/dualmap/dualmap/internal/sim/engine"
)

// Run drives the engine in wall time until ctx ends; see "Time" in the
// package doc. Inference requests wait for it: call it once, alongside
// serving Handler, and end it after the HTTP server has shut down so that
// in-flight requests can finish. When it returns, requests still waiting
// are answered 503 (or their stream is cut). It panics if called twice.
func (s *Server) Run(ctx context.Context) {
	if !s.started.CompareAndSwap(false, true) {
		panic("httpengine: Server.Run called twice")
	}
	defer close(s.stopped)
	l := &loop{
		s:        s,
		e:        s.eng,
		clk:      clock{start: time.Now(), scale: s.opt.TimeScale},
		live:     make(map[int64]*tracked),
		decoding: make(map[int64]*tracked),
	}
	if s.opt.KVEvents != nil {
		l.kv = newKVState(s, s.eng)
		s.eng.ObserveCache(l.kv.observe)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		l.catchUp(l.clk.sim(time.Now()))
		next := l.e.NextTime()
		var wake <-chan time.Time
		if !math.IsInf(next, 1) {
			timer.Reset(time.Until(l.clk.wall(next)))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case t := <-s.submit:
			l.catchUp(l.clk.sim(time.Now()))
			l.add(t)
			for more := true; more; {
				select {
				case t := <-s.submit:
					l.add(t)
				default:
					more = false
				}
			}
			l.publish()
		case <-wake:
			// The step's end, even if rounding puts the wall clock a hair
			// before it.
			l.catchUp(max(l.clk.sim(time.Now()), next))
		}
	}
}

// loop is Run's state; only Run's goroutine touches it.
type loop struct {
	s   *Server
	e   *engine.Engine
	clk clock
	now float64 // the latest simulated time given to the engine

	live     map[int64]*tracked // submitted, not completed, by request ID
	decoding map[int64]*tracked // the part of live past its first token
	evs      []engine.Event
	changed  []*tracked
	genToks  int64    // output tokens generated, all requests
	kv       *kvState // KV-event publishing, or nil
}

// tracked is Run's view of one request.
type tracked struct {
	t         *ticket
	p         progress // Run's copy, sent to the ticket on change
	firstStep int64    // engine steps finished when the first token came out
}

// add submits t's request at the current time, after the KV blocks it
// received.
func (l *loop) add(t *ticket) {
	if l.kv != nil { // first: the blocks received are published too
		l.kv.learn(t.req, t.tokens)
	}
	if len(t.received) > 0 {
		l.e.Receive(t.received)
	}
	l.e.Submit(l.now, t.req)
	l.live[t.req.ID] = &tracked{t: t, p: progress{PromptTokens: t.req.Tokens}}
}

// catchUp runs the engine up to simulated time now (or the latest time
// already used, if later), one step at a time, so that every decode step
// produces its tokens at its own end.
func (l *loop) catchUp(now float64) {
	l.now = max(l.now, now)
	for t := l.e.NextTime(); t <= l.now; t = l.e.NextTime() {
		l.step(t)
	}
}

// step advances the engine to t, the end of the step in progress or the
// start of the next one, and reports what changed: first tokens, one more
// token for each decoding request when a step ends, and completions. The
// snapshot is published before the handlers hear of it, so a client that
// has its whole answer sees the engine without its request.
func (l *loop) step(t float64) {
	l.evs = l.e.Advance(t, l.evs[:0])
	steps := l.e.Stats().Steps
	l.changed = l.changed[:0]
	for _, ev := range l.evs {
		id := ev.Req.ID
		tr := l.live[id]
		if tr == nil {
			continue // not ours: cannot happen
		}
		switch ev.Kind {
		case engine.FirstToken:
			tr.firstStep = steps
			tr.p.First = true
			tr.p.PromptTokens = ev.Req.Tokens
			tr.p.CachedTokens = ev.Req.CachedTokens
			tr.p.TTFT = ev.Req.FirstToken - ev.Req.Arrived
			l.s.metrics.ttft.Observe(tr.p.TTFT)
			l.decoding[id] = tr
		case engine.Completed:
			l.produce(tr, ev.Req.Output)
			tr.p.Done = true
			tr.p.Capped = ev.Req.OutputCapped
			delete(l.decoding, id)
			delete(l.live, id)
			l.changed = append(l.changed, tr)
		}
	}
	for _, tr := range l.decoding {
		// One token at the first token's step, then one per step (the
		// realistic model tracks it: a preempted request pauses).
		n := min(tr.t.req.Output, int(1+steps-tr.firstStep))
		if !l.s.opt.Profile.Legacy() {
			n = l.e.Generated(tr.t.req)
		}
		if l.produce(tr, n) {
			l.changed = append(l.changed, tr)
		}
	}
	l.publish()
	for _, tr := range l.changed {
		tr.t.update(tr.p)
	}
	clear(l.changed) // drop the pointers
}

// produce raises tr's generated tokens to n and reports whether it grew.
func (l *loop) produce(tr *tracked, n int) bool {
	if n <= tr.p.Generated {
		return false
	}
	l.genToks += int64(n - tr.p.Generated)
	tr.p.Generated = n
	return true
}

// publish makes the engine's state visible to Snapshot and the metrics.
func (l *loop) publish() {
	if l.kv != nil {
		l.kv.flush()
	}
	l.s.setSnapshot(Snapshot{
		SimTime:              l.now,
		Waiting:              l.e.Waiting(),
		Running:              l.e.Running(),
		InFlight:             len(l.live),
		PendingPrefillTokens: l.e.PendingPrefillTokens(),
		CacheUsage:           l.e.CacheUsage(),
		GenerationTokens:     l.genToks,
		Engine:               l.e.Stats(),
	})
}
