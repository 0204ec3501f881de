package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestConservation(t *testing.T) {
	tiered := testProfile()
	tiered.HBMCacheBytes, tiered.DRAMCacheBytes = 4*512, 12*512
	tiered.DRAMLoadPerToken = 1.0 / 65536
	quadratic := testProfile()
	quadratic.PrefillQuadratic = 1.0 / (1 << 22)
	narrow := testProfile()
	narrow.MaxNumSeqs = 2
	tests := []struct {
		name      string
		p         Profile
		maxOutput int
	}{
		{"hbm only", testProfile(), 40},
		{"two tiers", tiered, 40},
		{"quadratic", quadratic, 40},
		{"two seqs", narrow, 40},
		{"single token outputs", testProfile(), 1},
		{"no cache", func() Profile { p := testProfile(); p.HBMCacheBytes = 0; return p }(), 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			e := newEngine(t, tt.p)
			var arrivals []arrival
			now := 0.0
			for i := range 300 {
				now += rng.ExpFloat64() * 0.4
				tokens := 1 + rng.IntN(4000)
				r := &Request{
					ID:     int64(i),
					Tokens: tokens,
					Blocks: chain(uint64(rng.IntN(6)), rng.IntN(4), blocksFor(tokens, 512)),
					Output: rng.IntN(tt.maxOutput + 1), // 0 means 1
				}
				arrivals = append(arrivals, arrival{now, r})
			}
			events := drive(t, e, arrivals)

			first := make(map[int64]int)
			done := make(map[int64]int)
			for _, ev := range events {
				id := ev.Req.ID
				switch ev.Kind {
				case FirstToken:
					first[id]++
					if ev.Time != ev.Req.FirstToken {
						t.Errorf("request %d: FirstToken event at %v, FirstToken = %v", id, ev.Time, ev.Req.FirstToken)
					}
				case Completed:
					if first[id] != 1 {
						t.Errorf("request %d completed before its first token", id)
					}
					done[id]++
					if ev.Time != ev.Req.Done {
						t.Errorf("request %d: Completed event at %v, Done = %v", id, ev.Time, ev.Req.Done)
					}
				default:
					t.Errorf("event kind = %v, want first-token or completed", ev.Kind)
				}
			}
			prevStart := math.Inf(-1)
			for _, a := range arrivals {
				r := a.r
				if first[r.ID] != 1 || done[r.ID] != 1 {
					t.Fatalf("request %d: %d FirstToken and %d Completed events, want 1 and 1", r.ID, first[r.ID], done[r.ID])
				}
				if !(r.Arrived <= r.PrefillStart && r.PrefillStart < r.FirstToken && r.FirstToken <= r.Done) {
					t.Errorf("request %d: Arrived %v, PrefillStart %v, FirstToken %v, Done %v: want ordered",
						r.ID, r.Arrived, r.PrefillStart, r.FirstToken, r.Done)
				}
				if r.PrefillStart < prevStart {
					t.Errorf("request %d: PrefillStart = %v before the previous request's %v: not FCFS", r.ID, r.PrefillStart, prevStart)
				}
				prevStart = r.PrefillStart
				uncached := r.Tokens - r.CachedTokens
				if ttft, min := r.FirstToken-r.PrefillStart, tt.p.PrefillPerToken*float64(uncached); ttft < min {
					t.Errorf("request %d: prefill took %v, want >= %v for %d uncached tokens", r.ID, ttft, min, uncached)
				}
				if r.CachedTokens < 0 || r.CachedTokens > r.Tokens-1 || r.DRAMTokens < 0 || r.DRAMTokens > r.CachedTokens {
					t.Errorf("request %d: CachedTokens %d, DRAMTokens %d of %d tokens", r.ID, r.CachedTokens, r.DRAMTokens, r.Tokens)
				}
			}
			st := e.Stats()
			if st.Submitted != 300 || st.Admitted != 300 || st.Completed != 300 {
				t.Errorf("Stats() = %+v, want 300 submitted, admitted and completed", st)
			}
			if e.PendingPrefillTokens() != 0 {
				t.Errorf("PendingPrefillTokens() = %d after draining, want 0", e.PendingPrefillTokens())
			}
			if u := e.CacheUsage(); u < 0 || u > 1 {
				t.Errorf("CacheUsage() = %v, want within [0, 1]", u)
			}
		})
	}
}

func TestLoneRequestTiming(t *testing.T) {
	p := testProfile()
	p.PrefillQuadratic = 1.0 / (1 << 20)
	// 2500 tokens in steps of 1024: chunks 1024, 1024 and 452, each step
	// paying base + per-token + quadratic (chunk x context at its end).
	d1 := 1.0/64 + 1024.0/1024 + 1024.0*1024/(1<<20)
	d2 := 1.0/64 + 1024.0/1024 + 1024.0*2048/(1<<20)
	d3 := 1.0/64 + 452.0/1024 + 452.0*2500/(1<<20)
	decode := 1.0/64 + 1.0/256 // one sequence decoding alone
	tests := []struct {
		name   string
		output int
		done   float64
	}{
		{"one output token", 1, 10 + d1 + d2 + d3},
		{"three output tokens", 3, 10 + d1 + d2 + d3 + decode + decode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, p)
			r := &Request{ID: 1, Tokens: 2500, Blocks: chain(1, 0, 5), Output: tt.output}
			drive(t, e, []arrival{{10, r}})
			if want := 10 + d1 + d2 + d3; r.FirstToken != want {
				t.Errorf("FirstToken = %v, want %v", r.FirstToken, want)
			}
			if r.Done != tt.done {
				t.Errorf("Done = %v, want %v", r.Done, tt.done)
			}
			if want := int64(2 + tt.output); e.Stats().Steps != want {
				t.Errorf("Stats().Steps = %d, want %d", e.Stats().Steps, want)
			}
		})
	}
}

func TestAdvanceStepByStep(t *testing.T) {
	e := newEngine(t, testProfile())
	if got := e.NextTime(); !math.IsInf(got, 1) {
		t.Fatalf("NextTime() of a new engine = %v, want +Inf", got)
	}
	r := &Request{ID: 1, Tokens: 1500, Output: 2}
	e.Submit(5, r)
	if got := e.NextTime(); got != 5 {
		t.Fatalf("NextTime() after Submit(5) = %v, want 5", got)
	}
	if got := e.PendingPrefillTokens(); got != 1500 {
		t.Errorf("PendingPrefillTokens() while waiting = %d, want 1500", got)
	}
	if ev := e.Advance(4, nil); len(ev) != 0 || e.Waiting() != 1 {
		t.Fatalf("Advance(4) = %v with Waiting() = %d, want no events and 1 waiting", ev, e.Waiting())
	}
	d1 := 1.0/64 + 1024.0/1024
	d2 := 1.0/64 + 476.0/1024
	steps := []struct {
		now     float64
		events  int
		next    float64
		pending int
	}{
		{5, 0, 5 + d1, 1500},          // first chunk in progress
		{5 + d1/2, 0, 5 + d1, 1500},   // mid-step: nothing happens
		{5 + d1, 0, 5 + d1 + d2, 476}, // second chunk in progress
		{5 + d1 + d2, 1, 5 + d1 + d2 + 1.0/64 + 1.0/256, 0},
		{100, 1, math.Inf(1), 0},
	}
	for _, s := range steps {
		ev := e.Advance(s.now, nil)
		if len(ev) != s.events {
			t.Errorf("Advance(%v) gave %d events, want %d", s.now, len(ev), s.events)
		}
		if got := e.NextTime(); got != s.next {
			t.Errorf("after Advance(%v): NextTime() = %v, want %v", s.now, got, s.next)
		}
		if got := e.PendingPrefillTokens(); got != s.pending {
			t.Errorf("after Advance(%v): PendingPrefillTokens() = %d, want %d", s.now, got, s.pending)
		}
	}
}

func TestCacheHitDecidedAtPrefillStart(t *testing.T) {
	p := testProfile()
	e := newEngine(t, p)
	var events []Event
	run := func(until float64) {
		for next := e.NextTime(); next <= until; next = e.NextTime() {
			events = e.Advance(next, events)
		}
	}
	// A runs alone and finishes; B shares its first 3 blocks.
	a := &Request{ID: 1, Tokens: 2048, Blocks: chain(1, 0, 4), Output: 1}
	e.Submit(0, a)
	run(100)
	b := &Request{ID: 2, Tokens: 2048, Blocks: append(chain(1, 0, 3), 999), Output: 1}
	e.Submit(100, b)
	run(200)
	if b.CachedTokens != 3*512 {
		t.Errorf("B.CachedTokens = %d, want %d", b.CachedTokens, 3*512)
	}

	// A2 takes three chunks; C shares its prefix but arrives while A2 is
	// prefilling and is admitted into A2's last step, before A2's blocks
	// are in the cache.
	a2 := &Request{ID: 3, Tokens: 3000, Blocks: chain(2, 0, 6), Output: 1}
	e.Submit(200, a2)
	run(200)
	c := &Request{ID: 4, Tokens: 1536, Blocks: chain(2, 0, 3), Output: 1}
	e.Submit(200.5, c)
	run(300)
	if c.PrefillStart >= a2.FirstToken {
		t.Fatalf("C.PrefillStart = %v, want before A2.FirstToken = %v", c.PrefillStart, a2.FirstToken)
	}
	if c.CachedTokens != 0 {
		t.Errorf("C.CachedTokens = %d, want 0 (A2 still prefilling when C started)", c.CachedTokens)
	}

	// With one sequence slot, D is routed while A3 prefills but starts
	// after A3 finished: the hit is decided then, so D gets it.
	p.MaxNumSeqs = 1
	e = newEngine(t, p)
	a3 := &Request{ID: 5, Tokens: 3000, Blocks: chain(3, 0, 6), Output: 1}
	d := &Request{ID: 6, Tokens: 2048, Blocks: chain(3, 0, 4), Output: 1}
	drive(t, e, []arrival{{0, a3}, {0.5, d}})
	if d.CachedTokens != 4*512-1 {
		t.Errorf("D.CachedTokens = %d, want %d (whole prompt cached, one token computed)", d.CachedTokens, 4*512-1)
	}
}

func TestDRAMHit(t *testing.T) {
	p := testProfile()
	p.MaxBatchedTokens = 4096
	p.HBMCacheBytes, p.DRAMCacheBytes = 2*512, 8*512
	p.DRAMLoadPerToken = 1.0 / 4096
	e := newEngine(t, p)
	a := &Request{ID: 1, Tokens: 2048, Blocks: chain(1, 0, 4), Output: 1}
	drive(t, e, []arrival{{0, a}})
	// A's blocks 0 and 1 are in HBM, 2 and 3 were demoted to DRAM.
	b := &Request{ID: 2, Tokens: 2560, Blocks: chain(1, 0, 5), Output: 1}
	b.Blocks[4] = 12345
	drive(t, e, []arrival{{10, b}})
	if b.CachedTokens != 2048 || b.DRAMTokens != 1024 {
		t.Errorf("B cached %d tokens, %d from DRAM, want 2048 and 1024", b.CachedTokens, b.DRAMTokens)
	}
	want := 10 + 1.0/64 + 512.0/1024 + 1024.0/4096
	if b.FirstToken != want {
		t.Errorf("B.FirstToken = %v, want %v (DRAM load included)", b.FirstToken, want)
	}
	if st := e.Stats(); st.CachedTokens != 2048 || st.DRAMTokens != 1024 || st.PromptTokens != 2048+2560 {
		t.Errorf("Stats() = %+v, want 2048 cached, 1024 DRAM, %d prompt tokens", st, 2048+2560)
	}
}

func TestChunkedPrefill(t *testing.T) {
	p, err := LoadProfile("qwen2.5-7b-910b4")
	if err != nil {
		t.Fatal(err)
	}
	p.MaxModelLen = 65536
	e := newEngine(t, p)
	r := &Request{ID: 1, Tokens: 50000, Blocks: chain(1, 0, blocksFor(50000, 512)), Output: 2}
	e.Submit(0, r)
	var steps int64
	for ev := []Event(nil); len(ev) == 0; {
		ev = e.Advance(e.NextTime(), nil)
		steps = e.Stats().Steps
	}
	if want := int64(3); steps != want { // ceil(50000/20480)
		t.Errorf("prefill steps = %d, want %d", steps, want)
	}
	if want := 3*p.DecodeStepBase + 50000*p.PrefillPerToken; math.Abs(r.FirstToken-want) > 1e-9 {
		t.Errorf("FirstToken = %v, want %v", r.FirstToken, want)
	}
	if r.Truncated {
		t.Errorf("Truncated = true, want false")
	}
}

func TestTruncation(t *testing.T) {
	tests := []struct {
		name      string
		tokens    int
		blocks    int
		want      int
		wantBlk   int
		truncated bool
	}{
		{"at the limit", 8192, 16, 8192, 16, false},
		{"one over", 8193, 17, 8192, 16, true},
		{"far over", 30000, 59, 8192, 16, true},
		{"partial last block", 8000, 16, 8000, 16, false},
	}
	e := newEngine(t, testProfile())
	var truncated int64
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Request{ID: int64(i), Tokens: tt.tokens, Blocks: chain(uint64(i), 0, tt.blocks)}
			e.Submit(0, r)
			if r.Truncated != tt.truncated || r.Tokens != tt.want || len(r.Blocks) != tt.wantBlk {
				t.Errorf("Submit() gave Truncated %v, Tokens %d, %d blocks, want %v, %d, %d",
					r.Truncated, r.Tokens, len(r.Blocks), tt.truncated, tt.want, tt.wantBlk)
			}
			if tt.truncated {
				truncated++
			}
			if got := e.Stats().Truncated; got != truncated {
				t.Errorf("Stats().Truncated = %d, want %d", got, truncated)
			}
		})
	}
}

func TestMaxNumSeqs(t *testing.T) {
	for _, limit := range []int{1, 2, 5} {
		t.Run("", func(t *testing.T) {
			p := testProfile()
			p.MaxNumSeqs = limit
			e := newEngine(t, p)
			var reqs []*Request
			for i := range 12 {
				r := &Request{ID: int64(i), Tokens: 100, Output: 10 + i}
				reqs = append(reqs, r)
				e.Submit(0, r)
			}
			peak := 0
			for next := e.NextTime(); !math.IsInf(next, 1); next = e.NextTime() {
				e.Advance(next, nil)
				if e.Running() > limit {
					t.Fatalf("Running() = %d, want <= %d", e.Running(), limit)
				}
				peak = max(peak, e.Running())
			}
			if peak != limit {
				t.Errorf("peak Running() = %d, want %d", peak, limit)
			}
			for _, r := range reqs {
				if r.Done == 0 {
					t.Errorf("request %d never completed", r.ID)
				}
			}
		})
	}
}

func TestNewInvalidProfile(t *testing.T) {
	p := testProfile()
	p.PrefillPerToken = -1
	if _, err := New(p); err == nil {
		t.Errorf("New() with a negative prefill cost: error = nil, want one")
	}
}
