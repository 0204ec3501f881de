package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kvProfile is testProfile with the realistic model and room for kvBlocks
// blocks of 512 tokens (max_model_len 4096: 8 blocks per request at most).
func kvProfile(kvBlocks int) Profile {
	p := testProfile()
	p.EngineModel = ModelRealistic
	p.MaxModelLen = 4096
	p.HBMCacheBytes = int64(kvBlocks * 512)
	p.DecodePerContextToken = 1.0 / (1 << 20)
	return p
}

// heldBlocks recounts the HBM blocks running requests hold: every distinct
// hashed block held plus every anonymous block. It must equal pool.used.
func heldBlocks(e *Engine) int {
	seen := map[uint64]bool{}
	n := 0
	count := func(r *Request) {
		for _, h := range e.promptBlocks(r)[:r.kv.held] {
			seen[h] = true
		}
		n += r.kv.anon
	}
	for i := range e.prefilling.len() {
		count(e.prefilling.at(i).r)
	}
	for _, d := range e.decoding {
		if d.r.kv.state == stateDecode && d.r.kv.stint == d.stint {
			count(d.r)
		}
	}
	return n + len(seen)
}

var checks int

// checkPool fails t unless the pool's counters are within capacity and the
// held blocks are exactly those of the running requests.
func checkPool(t *testing.T, e *Engine) {
	t.Helper()
	p := e.pool
	if p.used < 0 || p.used > p.hbmCap || p.used+p.hbmFree > p.hbmCap || p.dramLen > p.dramCap || p.hbmFree < 0 {
		t.Fatalf("pool over capacity: used %d + free cached %d of %d HBM blocks, %d of %d DRAM", p.used, p.hbmFree, p.hbmCap, p.dramLen, p.dramCap)
	}
	if checks++; checks%4 != 0 {
		return // the full recount is slow under -race
	}
	if got := heldBlocks(e); got != p.used {
		t.Fatalf("running requests hold %d blocks, pool.used = %d", got, p.used)
	}
	if want := e.prefilling.len(); e.Running() < want {
		t.Fatalf("Running() = %d < %d prefilling", e.Running(), want)
	}
}

// TestKVInvariants is a property test: random request streams (seeded)
// through engines with little KV memory, with and without a DRAM tier and
// prefill noise. No request is lost, the blocks in use never exceed the
// capacity and are exactly the running requests', TTFT is never below the
// request's own prefill time, every preempted request finishes, events
// come in time order. Preemptions must happen in some runs.
func TestKVInvariants(t *testing.T) {
	var preemptions int64
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := kvProfile(8 + rng.IntN(24))
		if rng.IntN(2) == 0 {
			p.DRAMCacheBytes = int64(rng.IntN(16) * 512)
		}
		if rng.IntN(2) == 0 {
			p.PrefillNoise = 0.5
			p.NoiseSeed = seed
		}
		p.MaxNumSeqs = 1 + rng.IntN(8)
		p.MaxBatchedTokens = max(p.MaxNumSeqs, 256<<rng.IntN(4))
		e := newEngine(t, p)
		n := 20 + rng.IntN(80)
		reqs := make([]Request, n)
		arrivals := make([]arrival, n)
		now := 0.0
		for i := range reqs {
			now += rng.ExpFloat64() * 0.05
			tokens := 1 + rng.IntN(5000) // some above max_model_len
			reqs[i] = Request{ID: int64(i), Tokens: tokens, Output: 1 + rng.IntN(1500),
				Blocks: chain(uint64(rng.IntN(4)), rng.IntN(6), blocksFor(tokens, 512))}
			arrivals[i] = arrival{at: now, r: &reqs[i]}
		}
		firsts, dones := map[int64]int{}, map[int64]int{}
		checkEvents := func(evs []Event) {
			for _, ev := range evs {
				r := ev.Req
				switch ev.Kind {
				case FirstToken:
					firsts[r.ID]++
					own := p.PrefillPerToken * r.kv.cost * float64(r.Tokens-r.CachedTokens)
					if ttft := r.FirstToken - r.Arrived; ttft < own*(1-1e-9) || r.FirstToken-r.PrefillStart < own*(1-1e-9) {
						t.Fatalf("seed %d: request %d TTFT %v (prefill from %v) below its own prefill time %v", seed, r.ID, ttft, r.PrefillStart, own)
					}
				case Completed:
					dones[r.ID]++
				}
			}
		}
		// drive checks time order; check the pool at every step too.
		var events []Event
		last := math.Inf(-1)
		runTo := func(until float64) {
			for next := e.NextTime(); next <= until && !math.IsInf(next, 1); next = e.NextTime() {
				k := len(events)
				events = e.Advance(next, events)
				for _, ev := range events[k:] {
					if ev.Time < last || ev.Time > next {
						t.Fatalf("seed %d: event at %v (last %v, now %v): out of order", seed, ev.Time, last, next)
					}
					last = ev.Time
				}
				checkEvents(events[k:])
				checkPool(t, e)
			}
		}
		for _, a := range arrivals {
			runTo(a.at)
			e.Submit(a.at, a.r)
		}
		runTo(math.Inf(1))
		st := e.Stats()
		if st.Completed != int64(n) || e.Running() != 0 || e.Waiting() != 0 {
			t.Fatalf("seed %d: %d of %d completed, %d running, %d waiting", seed, st.Completed, n, e.Running(), e.Waiting())
		}
		for i := range reqs {
			r := &reqs[i]
			if firsts[r.ID] != 1 || dones[r.ID] != 1 || r.Done < r.FirstToken {
				t.Fatalf("seed %d: request %d: %d first tokens, %d completions, done %v first %v", seed, r.ID, firsts[r.ID], dones[r.ID], r.Done, r.FirstToken)
			}
			if r.Tokens+r.Output > p.MaxModelLen && r.Output > 1 {
				t.Fatalf("seed %d: request %d: %d + %d tokens exceed max_model_len", seed, r.ID, r.Tokens, r.Output)
			}
		}
		if e.pool.used != 0 {
			t.Fatalf("seed %d: %d blocks still held when idle", seed, e.pool.used)
		}
		preemptions += st.Preemptions
	}
	if preemptions == 0 {
		t.Fatal("no preemption in any run: the property test does not exercise it")
	}
}

// TestKVAdmissionWaitsForBlocks: with room for one request's blocks only,
// the second is admitted when the first completes, not before.
func TestKVAdmissionWaitsForBlocks(t *testing.T) {
	p := kvProfile(8)         // one max_model_len request
	p.MaxBatchedTokens = 8192 // whole prompts in one chunk: no chunk to preempt for
	e := newEngine(t, p)
	a := &Request{ID: 1, Tokens: 3000, Output: 4, Blocks: chain(1, 0, 6)}
	b := &Request{ID: 2, Tokens: 3000, Output: 4, Blocks: chain(2, 0, 6)}
	drive(t, e, []arrival{{0, a}, {0, b}})
	if b.PrefillStart < a.Done {
		t.Errorf("second request admitted at %v, before the first completed at %v: 12 blocks in 8", b.PrefillStart, a.Done)
	}
	if st := e.Stats(); st.Preemptions != 0 {
		t.Errorf("Preemptions = %d, want 0 (admission, not decode, ran out)", st.Preemptions)
	}
}

// TestKVPreemptsNewest: two requests fill the memory; when the older one's
// decode needs a block, the newer one is preempted, goes back to the queue
// and finishes after the older one, recomputing its prompt and output.
func TestKVPreemptsNewest(t *testing.T) {
	p := kvProfile(8)
	p.MaxBatchedTokens = 4096
	e := newEngine(t, p)
	old := &Request{ID: 1, Tokens: 2048, Output: 600, Blocks: chain(1, 0, 4)} // 4 blocks, a 5th after 1 decode step, a 6th after 513
	young := &Request{ID: 2, Tokens: 1536, Output: 600, Blocks: chain(2, 0, 3)}
	drive(t, e, []arrival{{0, old}, {0, young}})
	st := e.Stats()
	if old.Preemptions != 0 || young.Preemptions == 0 || st.Preemptions != int64(young.Preemptions) {
		t.Fatalf("preemptions: old %d, young %d, stats %d; want the young one only", old.Preemptions, young.Preemptions, st.Preemptions)
	}
	if st.RecomputedTokens == 0 || young.Done < old.Done {
		t.Errorf("RecomputedTokens = %d, young done %v, old done %v: want a recompute and the young one last", st.RecomputedTokens, young.Done, old.Done)
	}
	if young.FirstToken >= young.Done || young.FirstToken > old.Done {
		t.Errorf("young first token %v, done %v: its first token came before the preemption", young.FirstToken, young.Done)
	}
}

// TestKVDecodeStepTime: a lone request's decode steps cost base + per seq
// + per context token x its context, which grows by one each step.
func TestKVDecodeStepTime(t *testing.T) {
	p := kvProfile(16)
	e := newEngine(t, p)
	r := &Request{ID: 1, Tokens: 1024, Output: 3}
	drive(t, e, []arrival{{0, r}})
	prefill := p.DecodeStepBase + p.PrefillPerToken*1024
	if r.FirstToken != prefill {
		t.Fatalf("FirstToken = %v, want %v", r.FirstToken, prefill)
	}
	step := func(ctx int) float64 { return p.DecodeStepBase + p.DecodePerSeq + p.DecodePerContextToken*float64(ctx) }
	if want := prefill + step(1025) + step(1026); math.Abs(r.Done-want) > 1e-12 {
		t.Errorf("Done = %v, want %v (contexts 1025 and 1026)", r.Done, want)
	}
}

// TestKVSharedPrefixBlocksCountOnce: requests sharing a cached prefix hold
// its blocks once.
func TestKVSharedPrefixBlocksCountOnce(t *testing.T) {
	p := kvProfile(16)
	e := newEngine(t, p)
	warm := &Request{ID: 1, Tokens: 2048, Output: 1, Blocks: chain(1, 4, 4)}
	drive(t, e, []arrival{{0, warm}})
	a := &Request{ID: 2, Tokens: 2048, Output: 50, Blocks: chain(2, 4, 4)}
	b := &Request{ID: 3, Tokens: 2048, Output: 50, Blocks: chain(3, 4, 4)}
	e.Submit(10, a)
	e.Submit(10, b)
	e.Advance(10, nil)
	held, _, _ := e.KVBlocks()
	if a.CachedTokens != 2047 || b.CachedTokens != 2047 || held != 4 {
		t.Errorf("cached %d and %d, %d blocks held; want 2047, 2047 and the 4 shared blocks", a.CachedTokens, b.CachedTokens, held)
	}
}

// TestPrefillNoise: the factor is a pure function of seed and ID, with
// mean about 1 and the requested relative spread.
func TestPrefillNoise(t *testing.T) {
	if f := noiseFactor(0, 1, 5); f != 1 {
		t.Fatalf("noiseFactor(0) = %v, want 1", f)
	}
	if noiseFactor(0.3, 1, 5) != noiseFactor(0.3, 1, 5) || noiseFactor(0.3, 1, 5) == noiseFactor(0.3, 2, 5) {
		t.Fatal("noiseFactor is not a deterministic function of the seed")
	}
	const n = 20000
	var sum, sq float64
	for id := range int64(n) {
		f := noiseFactor(0.3, 9, id)
		if !(f > 0) {
			t.Fatalf("factor %v for id %d", f, id)
		}
		sum += f
		sq += f * f
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-1) > 0.02 || math.Abs(sd-0.3) > 0.02 {
		t.Errorf("mean %v, sd %v; want about 1 and 0.3", mean, sd)
	}
}

// TestKVAdvanceNoAlloc: once warm, the realistic model's steps allocate
// nothing.
func TestKVAdvanceNoAlloc(t *testing.T) {
	p, err := LoadProfile("qwen2.5-7b-910b4")
	if err != nil {
		t.Fatal(err)
	}
	at, template := benchWorkload(3000, 2)
	reqs := make([]Request, len(template))
	copy(reqs, template)
	e := newEngine(t, p)
	events := make([]Event, 0, 1024)
	for i := range reqs[:2000] {
		for e.NextTime() <= at[i] {
			events = e.Advance(e.NextTime(), events[:0])
		}
		e.Submit(at[i], &reqs[i])
	}
	i, steps := 2000, e.Stats().Steps
	allocs := testing.AllocsPerRun(1, func() { // runs twice: warm-up, then measured
		for end := i + 400; i < end; i++ {
			for e.NextTime() <= at[i] {
				events = e.Advance(e.NextTime(), events[:0])
			}
			e.Submit(at[i], &reqs[i])
		}
	})
	if e.Stats().Steps-steps < 1000 {
		t.Fatalf("only %d steps measured", e.Stats().Steps-steps)
	}
	if allocs > 20 { // the Go map may grow now and then
		t.Errorf("400 warm submissions and their steps allocated %v times", allocs)
	}
}

// TestKVRecomputeCountsOutput: a preempted request whose prompt blocks
// are still cached recomputes at least the output it had generated.
func TestKVRecomputeCountsOutput(t *testing.T) {
	p := kvProfile(8)
	p.MaxBatchedTokens = 4096
	e := newEngine(t, p)
	old := &Request{ID: 1, Tokens: 2048, Output: 600, Blocks: chain(1, 0, 4)}
	young := &Request{ID: 2, Tokens: 1000, Output: 600, Blocks: chain(2, 0, 2)}
	drive(t, e, []arrival{{0, old}, {0, young}})
	st := e.Stats()
	if young.Preemptions == 0 {
		t.Fatal("no preemption")
	}
	if young.CachedTokens > young.Tokens || st.RecomputedTokens < int64(young.Preemptions) {
		t.Errorf("cached %d of a %d-token prompt, %d tokens recomputed over %d preemptions: generated tokens have no cache",
			young.CachedTokens, young.Tokens, st.RecomputedTokens, young.Preemptions)
	}
}
