package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/hashing"
)

// benchScheduler returns a scheduler over n instances warmed with traffic,
// and a set of prompts to pick for.
func benchScheduler(b *testing.B, policy string, n int) (*Scheduler, []*Request) {
	s, _ := mustNew(b, Config{Policy: policy, Queue: QueueConfig{Budget: 16384}}, n)
	warm(b, s, 20*n)
	rng := rand.New(rand.NewPCG(77, 78))
	reqs := make([]*Request, 256)
	for i := range reqs {
		// 32-block (16k-token) prompts sharing up to 8 blocks of 30 prefixes.
		reqs[i] = req(prompt(uint64(rng.IntN(30)), uint64(1<<30+i), 1+rng.IntN(8), 32))
	}
	return s, reqs
}

// BenchmarkPick measures one routing decision (key depth, candidate pair,
// cached-prefix lookups, policy choice) with no state change.
func BenchmarkPick(b *testing.B) {
	for _, name := range Policies() {
		for _, n := range []int{8, 64, 1024} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				s, reqs := benchScheduler(b, name, n)
				benchPicks(b, s, reqs)
			})
		}
	}
}

// benchPicks times Pick over reqs in turn, reporting allocations.
func benchPicks(b *testing.B, s *Scheduler, reqs []*Request) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Pick(reqs[i&255]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteComplete measures the whole life of a request in the
// scheduler: route (with key-depth observation and KV-index update), first
// token, completion. Requests are dispatched at once (no router queue).
func BenchmarkRouteComplete(b *testing.B) {
	for _, n := range []int{8, 64, 1024} {
		b.Run(fmt.Sprintf("dualmap/%d", n), func(b *testing.B) {
			s, _ := mustNew(b, Config{}, n)
			warm(b, s, 20*n)
			_, reqs := benchScheduler(b, "dualmap", 1)
			var out outcome
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := reqs[i&255]
				r.state = stateNew // reused: it finished in the previous lap
				if _, err := s.Submit(r, &out); err != nil {
					b.Fatal(err)
				}
				s.FirstToken(r)
				s.Complete(r)
				out.reset()
			}
		})
	}
}

func BenchmarkKeyDepthLookup(b *testing.B) {
	k := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512)
	p := prompt(1, 1, 8, 32)
	for i := 0; i < 20000; i++ {
		q := prompt(1, uint64(i), 8, 32)
		k.observe(q, k.depth(q), 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = k.depth(p)
	}
}

func BenchmarkRingCandidates(b *testing.B) {
	for _, n := range []int{8, 64, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rs := newRingSet(2, ids(pool(n)), nil, DefaultVirtualNodes)
			ready := allReady(n)
			var c [maxCandidates]int32
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rs.candidates(uint64(i)*hashing.Golden, ready, &c)
			}
		})
	}
}

func TestHotPathZeroAlloc(t *testing.T) {
	k := newKeyDepth(KeyDepthConfig{}.withDefaults(), 8, 512)
	p := prompt(1, 1, 8, 32)
	if a := testing.AllocsPerRun(100, func() { _ = k.depth(p) }); a != 0 {
		t.Errorf("keyDepth.depth allocs = %v, want 0", a)
	}
	rs := newRingSet(2, ids(pool(64)), nil, DefaultVirtualNodes)
	ready := allReady(64)
	var c [maxCandidates]int32
	if a := testing.AllocsPerRun(100, func() { rs.candidates(12345, ready, &c) }); a != 0 {
		t.Errorf("ringSet.candidates allocs = %v, want 0", a)
	}
}

// BenchmarkParallel routes from 64 goroutines at once (as 64 concurrent
// ext_proc streams do) and reports decisions per second: pick alone
// (read-only) and a request's whole life (route, first token, complete).
func BenchmarkParallel(b *testing.B) {
	for _, n := range []int{8, 1024} {
		for _, op := range []string{"pick", "route"} {
			b.Run(fmt.Sprintf("%s/%d", op, n), func(b *testing.B) {
				s, _ := mustNew(b, Config{}, n)
				warm(b, s, 20*n)
				_, proto := benchScheduler(b, "dualmap", 1)
				var next atomic.Int64
				b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					g := int(next.Add(1))
					reqs := make([]*Request, 16)
					for i := range reqs {
						reqs[i] = &Request{Blocks: proto[(g*16+i)&255].Blocks, Tokens: proto[(g*16+i)&255].Tokens}
					}
					for i := 0; pb.Next(); i++ {
						r := reqs[i&15]
						if op == "pick" {
							if _, err := s.Pick(r); err != nil {
								b.Error(err)
								return
							}
							continue
						}
						r.state = stateNew // reused: it finished in the previous lap
						if _, err := s.Submit(r, nil); err != nil {
							b.Error(err)
							return
						}
						s.FirstToken(r)
						s.Complete(r)
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
			})
		}
	}
}
