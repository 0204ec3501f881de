package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchWorkload returns n requests shaped like the Mooncake conversation
// trace: prompts of 2k to 22k tokens (mean ~12k) that open with a shared
// system-prompt block and continue one of 200 conversations, outputs of 1 to
// 700 tokens (mean ~350), Poisson arrivals at rate per second.
func benchWorkload(n int, rate float64) ([]float64, []Request) {
	rng := rand.New(rand.NewPCG(42, 43))
	at := make([]float64, n)
	reqs := make([]Request, n)
	now := 0.0
	for i := range reqs {
		now += rng.ExpFloat64() / rate
		tokens := 2000 + rng.IntN(20001)
		at[i] = now
		reqs[i] = Request{
			ID:     int64(i),
			Tokens: tokens,
			Blocks: chain(uint64(1+rng.IntN(200)), 1, blocksFor(tokens, 512)),
			Output: 1 + rng.IntN(700),
		}
	}
	return at, reqs
}

// BenchmarkEngine pushes 12,000 requests through one qwen2.5-7b-910b4
// engine at 3.5/8 requests per second: one eighth of a 3.5 req/s cluster of
// 8, or the whole cluster's engine work. It reports ns per request, for the
// realistic and the legacy model.
func BenchmarkEngine(b *testing.B) {
	for _, model := range []string{ModelRealistic, ModelLegacy} {
		b.Run(model, func(b *testing.B) { benchEngine(b, model) })
	}
}

func benchEngine(b *testing.B, model string) {
	p, err := LoadProfile("qwen2.5-7b-910b4")
	if err != nil {
		b.Fatal(err)
	}
	p.EngineModel = model
	p = p.Resolved()
	const n = 12000
	at, template := benchWorkload(n, 3.5/8)
	reqs := make([]Request, n)
	var events []Event
	var e *Engine
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		copy(reqs, template)
		e = newEngine(b, p)
		for i := range reqs {
			for e.NextTime() <= at[i] {
				events = e.Advance(e.NextTime(), events[:0])
			}
			e.Submit(at[i], &reqs[i])
		}
		for next := e.NextTime(); !math.IsInf(next, 1); next = e.NextTime() {
			events = e.Advance(next, events[:0])
		}
	}
	b.StopTimer()
	st := e.Stats()
	if st.Completed != n {
		b.Fatalf("Stats().Completed = %d, want %d", st.Completed, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/req")
	b.ReportMetric(float64(st.Steps)/n, "steps/req")
	b.ReportMetric(float64(st.CachedTokens)/float64(st.PromptTokens), "hit-rate")
	b.ReportMetric(float64(st.Preemptions), "preemptions")
}
