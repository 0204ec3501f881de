package scheduler

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// Every registered policy must pass these.

func TestPolicyConformanceEmptyPool(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: name}, 0)
			r := req(prompt(1, 1, 0, 4))
			if _, err := s.Submit(r, nil); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("Submit() on empty pool error = %v, want ErrNoEndpoint", err)
			}
			if _, err := s.Pick(r); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("Pick() on empty pool error = %v, want ErrNoEndpoint", err)
			}
		})
	}
}

func TestPolicyConformanceNoReadyInstance(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: name}, 3)
			for i, in := range pool(3) {
				var err error
				if i == 0 {
					err = s.SetDraining(in.ID, true)
				} else {
					err = s.SetHealthy(in.ID, false)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Submit(req(prompt(1, 1, 0, 4)), nil); !errors.Is(err, ErrNoEndpoint) {
				t.Errorf("Submit() error = %v, want ErrNoEndpoint", err)
			}
		})
	}
}

// The result is always a ready (healthy, non-draining) member, under random
// health flips, load and cache contents.
func TestPolicyConformanceAlwaysReady(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			const n = 8
			s, clk := mustNew(t, Config{Policy: name, Queue: QueueConfig{Budget: 8192}}, n)
			list := pool(n)
			rng := rand.New(rand.NewPCG(1, 2))
			unready := map[string]bool{}
			var out outcome
			var inflight []*Request
			for i := 0; i < 3000; i++ {
				if i%50 == 0 {
					id := list[rng.IntN(n)].ID
					if rng.IntN(2) == 0 {
						_ = s.SetHealthy(id, unready[id])
					} else {
						_ = s.SetDraining(id, !unready[id])
					}
					unready[id] = !unready[id]
					if unready[id] && (rng.IntN(2) == 0) {
						// undo half of the draining flips through the other flag
						_ = s.SetDraining(id, false)
						_ = s.SetHealthy(id, false)
					}
				}
				r := req(prompt(uint64(rng.IntN(20)), uint64(i), rng.IntN(4), 1+rng.IntN(12)))
				dec, err := s.Submit(r, &out)
				if len(unready) == n && allTrue(unready) {
					continue
				}
				if errors.Is(err, ErrNoEndpoint) {
					continue
				}
				if err != nil {
					t.Fatalf("Submit() error = %v", err)
				}
				if unready[dec.Instance] {
					t.Fatalf("Submit() = %s, which is not ready", dec.Instance)
				}
				inflight = append(inflight, r)
				clk.Advance(7_000_000)
				if len(inflight) > 20 {
					k := rng.IntN(len(inflight))
					s.FirstToken(inflight[k])
					s.Complete(inflight[k])
					inflight = append(inflight[:k], inflight[k+1:]...)
				}
				s.Tick()
				for _, d := range out.sent {
					if unready[d.Decision.Instance] {
						t.Fatalf("dispatched to %s, which is not ready", d.Decision.Instance)
					}
				}
				out.reset()
			}
		})
	}
}

func allTrue(m map[string]bool) bool {
	for _, v := range m {
		if !v {
			return false
		}
	}
	return true
}

// Pick allocates nothing.
func TestPolicyConformanceZeroAlloc(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			s, _ := mustNew(t, Config{Policy: name}, 16)
			warm(t, s, 500)
			r := req(prompt(3, 99, 3, 16))
			if a := testing.AllocsPerRun(200, func() { _, _ = s.Pick(r) }); a != 0 {
				t.Errorf("Pick() allocs = %v, want 0", a)
			}
		})
	}
}

// warm routes and completes count requests so that caches and loads are set.
func warm(t testing.TB, s *Scheduler, count int) {
	rng := rand.New(rand.NewPCG(9, 9))
	var out outcome
	for i := 0; i < count; i++ {
		r := req(prompt(uint64(rng.IntN(30)), uint64(i), 1+rng.IntN(6), 2+rng.IntN(14)))
		if _, err := s.Submit(r, &out); err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			s.FirstToken(r)
			s.Complete(r)
		}
		out.reset()
	}
}

// Safe under concurrent use (run with -race): routes, events, ticks,
// membership changes and reads from several goroutines.
func TestPolicyConformanceConcurrent(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			s, clk := mustNew(t, Config{Policy: name, Queue: QueueConfig{Budget: 4096}}, 8)
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					var out outcome
					for i := 0; i < 300; i++ {
						r := req(prompt(uint64(rng.IntN(10)), uint64(g<<20|i), 2, 4+rng.IntN(8)))
						dec, err := s.Submit(r, &out)
						if err != nil {
							t.Errorf("Submit() error = %v", err)
							return
						}
						clk.Advance(1_000_000)
						if dec.Queued {
							s.Cancel(r)
						} else {
							s.FirstToken(r)
							s.Complete(r)
						}
						for _, d := range out.take() {
							s.FirstToken(d.Request)
							s.Complete(d.Request)
						}
					}
				}(g)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out outcome
				for i := 0; i < 100; i++ {
					s.Tick()
					_ = s.Instances()
					_ = s.Stats()
					_ = s.KeyDepthState()
					_ = s.SetDraining(pool(8)[i%8].ID, i%2 == 0)
					for _, d := range out.take() {
						s.Complete(d.Request)
					}
				}
				_ = s.SetDraining(pool(8)[0].ID, false)
			}()
			wg.Wait()
		})
	}
}

func TestUnknownPolicyAndParams(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown policy", Config{Policy: "fastest"}, `unknown policy "fastest"`},
		{"unknown param", Config{Params: Params{"headroon": 1}}, `unknown parameter "headroon"`},
		{"bad choice", Config{Params: Params{"choice": "best"}}, `"best" is not one of`},
		{"out of range", Config{Params: Params{"headroom": 9.0}}, "outside"},
		{"wrong type", Config{Params: Params{"rebalance": 3}}, "want a boolean"},
		{"bounded-load bound", Config{Policy: "consistent-hash-bounded-load", Params: Params{"bound": 0.5}}, "outside"},
		{"params on rr", Config{Policy: "round-robin", Params: Params{"x": 1}}, "unknown parameter"},
		{"candidates", Config{Candidates: 5}, "candidates must be"},
		{"queue budget", Config{Queue: QueueConfig{Budget: -1}}, "queue.budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, pool(2))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := New(Config{Params: Params{"headroom": "0.5", "overflow": "global", "choice": "min-ttft", "rebalance": "false"}}, pool(2)); err != nil {
		t.Errorf("New() with valid string params error = %v", err)
	}
}

func TestBadInstances(t *testing.T) {
	tests := []struct {
		name string
		list []Instance
	}{
		{"empty id", []Instance{{ID: ""}}},
		{"duplicate", []Instance{{ID: "a"}, {ID: "a"}}},
		{"negative weight", []Instance{{ID: "a", Weight: -1}}},
		{"negative cache", []Instance{{ID: "a", CacheTokens: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(Config{}, tt.list); err == nil {
				t.Errorf("New(%v) error = nil, want one", tt.list)
			}
		})
	}
}

func TestBadRequest(t *testing.T) {
	s, _ := mustNew(t, Config{}, 2)
	for _, r := range []*Request{{Tokens: -1}, {Tokens: 5}} {
		if _, err := s.Submit(r, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Submit(%+v) error = %v, want ErrBadRequest", r, err)
		}
	}
	r := req(prompt(1, 1, 0, 2))
	route(t, s, r)
	if _, err := s.Submit(r, nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("second Submit() error = %v, want ErrBadRequest", err)
	}
}
