package engine

import (
	"fmt"
	"math"
)

// Engine is one simulated serving instance. See the package documentation
// for the model. The zero value is not usable: call New.
type Engine struct {
	p      Profile
	legacy bool
	cache  *cache // legacy model
	pool   *pool  // realistic model

	waiting       fifo[waiter]
	waitingTokens int // Σ Tokens of waiting requests
	prefilling    fifo[prefill]
	pendingTokens int // Σ uncached tokens of prefilling requests not yet through a finished step
	decoding      decodeHeap

	busy       bool    // a step is in progress
	stepEnd    float64 // end of the step in progress, or of the last step when idle
	stepIndex  int64   // index of the step in progress, or of the next one
	stepDur    float64 // duration of the step in progress
	stepTokens int     // prefill tokens in the step in progress
	stepDone   int     // leading prefilling requests whose prefill ends with the step in progress
	seq        int64   // admission counter

	// Realistic model.
	nDecoding   int          // live entries of decoding (it also holds stale ones)
	ctxBase     int64        // Σ (prefilled tokens - decodeAt) over decoding requests
	needs       needHeap     // decoding requests by the step that needs their next block
	decOrder    fifo[decRef] // decoding requests in admission order (stale ones skipped)
	stepPrefill float64      // Σ chunk x cost factor of the step in progress
	preemptedAt int64        // the last step whose composition preempted (-1: none)

	stats Stats
}

// decRef names one decode run of a request.
type decRef struct {
	r     *Request
	stint int32
}

func (d decRef) live() bool { return d.r.kv.state == stateDecode && d.r.kv.stint == d.stint }

// waiter is a request in the waiting queue.
type waiter struct {
	r  *Request
	at float64 // when it was submitted
}

// prefill is an admitted request whose prefill has not finished.
type prefill struct {
	r         *Request
	seq       int64
	remaining int // uncached tokens not yet given to a step
	context   int // tokens whose KV exists or is being computed: cached + chunks so far
}

// maxBlocks bounds a tier's capacity so that node indices fit an int32.
const maxBlocks = math.MaxInt32 / 2

// New returns an idle engine with an empty cache. Zero limits of p take
// their defaults.
func New(p Profile) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("engine: new: %w", err)
	}
	p = p.withDefaults()
	hbm, dram := p.CacheTokens()
	e := &Engine{p: p, legacy: p.Legacy(), stepEnd: math.Inf(-1), preemptedAt: -1}
	hbmBlocks, dramBlocks := min(hbm/p.BlockSize, maxBlocks), min(dram/p.BlockSize, maxBlocks)
	if e.legacy {
		e.cache = newCache(hbmBlocks, dramBlocks)
	} else {
		e.pool = newPool(hbmBlocks, dramBlocks)
	}
	return e, nil
}

// Profile returns the engine's profile, with defaults filled in.
func (e *Engine) Profile() Profile { return e.p }

// Submit appends r to the FCFS waiting queue at time now. It sets Arrived to
// now if it is zero, raises Tokens and Output below 1 to 1, and truncates a
// prompt longer than MaxModelLen (Truncated = true, Tokens = MaxModelLen,
// Blocks cut to ceil(MaxModelLen/BlockSize)). The request is admitted at the
// start of a later step, never one starting before now.
func (e *Engine) Submit(now float64, r *Request) {
	if r.Arrived == 0 {
		r.Arrived = now
	}
	r.Tokens = max(r.Tokens, 1)
	r.Output = max(r.Output, 1)
	r.Truncated = false
	if r.Tokens > e.p.MaxModelLen {
		r.Truncated = true
		r.Tokens = e.p.MaxModelLen
		if n := (e.p.MaxModelLen + e.p.BlockSize - 1) / e.p.BlockSize; len(r.Blocks) > n {
			r.Blocks = r.Blocks[:n]
		}
		e.stats.Truncated++
	}
	r.CachedTokens, r.DRAMTokens = 0, 0
	r.PrefillStart, r.FirstToken, r.Done = 0, 0, 0
	r.Preemptions, r.OutputCapped = 0, false
	r.kv = kvState{}
	if !e.legacy {
		// vLLM stops a request at max_model_len tokens, prompt and output.
		if limit := max(e.p.MaxModelLen-r.Tokens, 1); r.Output > limit {
			r.Output, r.OutputCapped = limit, true
			e.stats.OutputCapped++
		}
		r.kv.cost = noiseFactor(e.p.PrefillNoise, e.p.NoiseSeed, r.ID)
		r.kv.computed, r.kv.queued = r.Tokens, r.Tokens
	}
	e.stats.Submitted++
	e.waiting.push(waiter{r: r, at: now})
	e.waitingTokens += r.Tokens
}

// NextTime returns when the engine next needs Advance: the end of the step
// in progress; else, if requests are waiting, the time the next step starts
// (the later of the last step's end and the first waiting request's
// submission); else +Inf.
func (e *Engine) NextTime() float64 {
	switch {
	case e.busy:
		return e.stepEnd
	case e.waiting.len() > 0:
		return max(e.stepEnd, e.waiting.at(0).at)
	}
	return math.Inf(1)
}

// Advance runs the engine up to now: it finishes every step ending at or
// before now and starts the steps that follow, appending the events of the
// finished steps to dst in time order (FirstToken before Completed for the
// same request). It never emits an event later than now; a step ending after
// now stays in progress. It returns the extended dst.
func (e *Engine) Advance(now float64, dst []Event) []Event {
	for {
		if e.busy {
			if e.stepEnd > now {
				return dst
			}
			dst = e.finishStep(dst)
			if e.running() > 0 {
				e.startStep(e.stepEnd) // running requests always have work
				continue
			}
		}
		if e.waiting.len() == 0 {
			return dst
		}
		t := max(e.stepEnd, e.waiting.at(0).at)
		if t > now {
			return dst
		}
		e.startStep(t) // admits at least the first waiting request
	}
}

// Waiting returns the number of requests in the waiting queue.
func (e *Engine) Waiting() int { return e.waiting.len() }

// Running returns the number of admitted requests not yet completed, in
// prefill or in decode.
func (e *Engine) Running() int { return e.running() }

func (e *Engine) running() int {
	if e.legacy {
		return e.prefilling.len() + len(e.decoding)
	}
	return e.prefilling.len() + e.nDecoding
}

// PendingPrefillTokens returns the prompt tokens still to be prefilled: the
// uncached tokens of running requests not yet through a finished step
// (a chunk of the step in progress counts until the step ends), plus the
// full Tokens of every waiting request, since a waiting request's cache hit
// is only decided at admission.
func (e *Engine) PendingPrefillTokens() int { return e.pendingTokens + e.waitingTokens }

// CacheUsage returns the fraction of the prefix cache's blocks in use,
// across both tiers, from 0 to 1 (0 when the cache has no capacity).
//
// With the realistic model it is vLLM's kv_cache_usage_perc instead: the
// fraction of HBM blocks held by running requests (free cached blocks
// count as free).
func (e *Engine) CacheUsage() float64 {
	if !e.legacy {
		return float64(e.pool.used) / float64(max(e.pool.hbmCap, 1))
	}
	if c := e.cache.capacity(); c > 0 {
		return float64(e.cache.len()) / float64(c)
	}
	return 0
}

// KVBlocks returns the HBM blocks held by running requests, the free
// cached ones and the capacity (realistic model; zeros with the legacy
// model).
func (e *Engine) KVBlocks() (held, cached, capacity int) {
	if e.legacy {
		return 0, 0, 0
	}
	return e.pool.used, e.pool.hbmFree, e.pool.hbmCap
}

// Generated returns how many output tokens r, submitted to e and not yet
// completed, has generated: 0 before its first token, then one per decode
// step; it does not go back when r is preempted. After completion it is
// r.Output.
func (e *Engine) Generated(r *Request) int {
	switch {
	case r.Done > 0 || r.kv.state == stateDone:
		return r.Output
	case e.legacy:
		return 0 // the legacy model does not track it
	case r.kv.state == stateDecode:
		return min(r.kv.gen+int(e.stepIndex-1-r.kv.decodeAt), r.Output)
	}
	return r.kv.gen
}

// Stats returns the cumulative counters.
func (e *Engine) Stats() Stats { return e.stats }
