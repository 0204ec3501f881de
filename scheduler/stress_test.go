package scheduler

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type rvWaiter struct {
	t         *testing.T
	n         atomic.Int32
	withdrawn atomic.Bool // Cancel returned
	ch        chan bool   // true: dispatched
}

func (w *rvWaiter) note(ok bool) {
	if w.n.Add(1) > 1 {
		w.t.Errorf("waiter told twice")
	}
	if w.withdrawn.Load() {
		w.t.Errorf("waiter told after Cancel returned")
	}
	w.ch <- ok
}
func (w *rvWaiter) Dispatched(r *Request, d Decision) {
	if r.state != stateDispatched {
		w.t.Errorf("Dispatched with state %d", r.state)
	}
	if !r.inst.accepting { // the instance lock is held during the call
		w.t.Errorf("dispatched to %s, which does not accept requests", r.inst.ID)
	}
	w.note(true)
}
func (w *rvWaiter) Failed(r *Request, err error) { w.note(false) }

func stress(t *testing.T, cfg Config, seed uint64) {
	s, clk := mustNew(t, cfg, 8)
	full := pool(8)
	var seenMu sync.Mutex
	seen := map[*instance]bool{}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// churn
	bg.Add(1)
	go func() {
		defer bg.Done()
		rng := rand.New(rand.NewPCG(seed, 9))
		for {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(time.Millisecond)
			s.Tick()
			id := full[rng.IntN(len(full))].ID
			switch rng.IntN(9) {
			case 0:
				_ = s.SetHealthy(id, rng.IntN(3) == 0)
			case 1:
				_ = s.SetHealthy(id, true)
			case 2:
				_ = s.SetDraining(id, rng.IntN(3) == 0)
			case 3:
				_ = s.SetInstances(full[:4+rng.IntN(5)])
			case 4:
				_ = s.SetRemoteLoad(id, Load{Running: rng.IntN(3), PendingTokens: rng.IntN(2000)})
			case 5:
				_ = s.RecordCached(id, prompt(uint64(rng.IntN(4)), uint64(rng.Uint32()), 2, 6), time.Time{})
			case 6:
				st := s.KeyDepthState()
				s.ImportKeyDepth(st)
				_ = s.SetEngineLoad(id, EngineLoad{Waiting: rng.IntN(3)})
			case 7:
				s.Apply(s.Plan())
			}
			time.Sleep(30 * time.Microsecond)
		}
	}()
	// invariant checker: no single counter ever negative
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, in := range s.pick.Load().members {
				if in.pendingTokens.get() < 0 || in.running.get() < 0 || in.queuedTokens.get() < 0 || in.nqueued.get() < 0 {
					t.Errorf("negative counter on %s: pending %d running %d queued %d/%d", in.ID, in.pendingTokens.get(), in.running.get(), in.nqueued.get(), in.queuedTokens.get())
					return
				}
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), seed))
			for i := 0; i < 250; i++ {
				r := req(prompt(uint64(rng.IntN(4)), uint64(g<<20|i), 2, 2+rng.IntN(6)))
				if rng.IntN(4) == 0 {
					r.SLO = time.Duration(1+rng.IntN(50)) * time.Millisecond
				}
				w := &rvWaiter{t: t, ch: make(chan bool, 1)}
				d, err := s.Submit(r, w)
				if err != nil {
					time.Sleep(100 * time.Microsecond)
					if w.n.Load() != 0 {
						t.Errorf("told a waiter of a request Submit refused")
					}
					continue
				}
				dispatched := !d.Queued
				if d.Queued {
					select {
					case ok := <-w.ch:
						dispatched = ok
					case <-time.After(time.Duration(rng.IntN(3000)) * time.Microsecond):
						s.Cancel(r)
						w.withdrawn.Store(true)
						select {
						case <-w.ch:
						default:
						}
						if rng.IntN(2) == 0 {
							s.Cancel(r) // twice
						}
						seenMu.Lock()
						if r.inst != nil {
							seen[r.inst] = true
						}
						seenMu.Unlock()
						continue
					}
				}
				if !dispatched {
					continue
				}
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				for k := rng.IntN(3); k > 0; k-- {
					s.FirstToken(r)
				}
				if rng.IntN(4) == 0 {
					s.Cancel(r)
				} else {
					s.Complete(r)
				}
				if rng.IntN(3) == 0 {
					s.Complete(r)
					s.FirstToken(r)
				}
				w.withdrawn.Store(true)
				seenMu.Lock()
				seen[r.inst] = true
				seenMu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	for _, in := range full {
		_ = s.SetHealthy(in.ID, true)
		_ = s.SetDraining(in.ID, false)
	}
	_ = s.SetInstances(full)
	assertIdle(t, s)
	for in := range seen {
		if in.pendingTokens.get() != 0 || in.running.get() != 0 || in.nqueued.get() != 0 || in.queuedTokens.get() != 0 || len(in.queue) != 0 {
			t.Errorf("instance object %s (idx %d) holds pending %d running %d queued %d/%d", in.ID, in.idx, in.pendingTokens.get(), in.running.get(), in.nqueued.get(), in.queuedTokens.get())
		}
		if n := in.held.len(); n != 0 {
			t.Errorf("instance object %s (idx %d) holds %d blocks of held requests, with none queued", in.ID, in.idx, n)
		}
	}
	t.Logf("%d instance objects; stats %+v", len(seen), s.Stats())
}

func TestStressEveryPathReleases(t *testing.T) {
	for i, cfg := range []Config{
		{Queue: QueueConfig{Budget: 2048, MaxWait: 30 * time.Millisecond}, Rebalance: RebalanceConfig{OldestWait: time.Millisecond, PendingTokens: 1024}},
		{Queue: QueueConfig{Budget: 2048, MaxWait: 30 * time.Millisecond, Late: LateReject, MaxRunning: 3}, Rebalance: RebalanceConfig{OldestWait: time.Millisecond, External: true, Neighbor: true}},
		{Policy: "preble", Queue: QueueConfig{Budget: 1024, Late: LateServe}},
		{Policy: "round-robin"},
		{Policy: "consistent-hash-bounded-load", Queue: QueueConfig{Budget: 3000, MaxWait: 20 * time.Millisecond, Order: OrderCache}, Cost: CostConfig{PerInstance: true}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) { stress(t, cfg, uint64(i+1)) })
	}
}
