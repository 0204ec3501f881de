package engine

import (
	"math"

	"github.com/dualmap/dualmap/internal/hashing"
)

// This file is the realistic model's step: KV blocks for running requests,
// preemption by recompute and the context-dependent step time. The package
// documentation describes the model.

// need is a decoding request whose next token needs a new KV block at step.
type need struct {
	step  int64
	seq   int64
	r     *Request
	stint int32
}

// needHeap is a min-heap of needs by step, then admission order.
type needHeap = minHeap[need]

//lint:ignore U1000 called by minHeap[need] (the generic constraint), which staticcheck does not follow
func (a need) less(b need) bool { return a.step < b.step || a.step == b.step && a.seq < b.seq }

// noiseFactor returns the prefill cost factor of request id: log-normal
// with mean 1 and relative standard deviation sigma, a pure function of
// (sigma, seed, id); 1 when sigma is 0.
func noiseFactor(sigma float64, seed uint64, id int64) float64 {
	if sigma <= 0 {
		return 1
	}
	a := hashing.Mix64(seed ^ hashing.Mix64(uint64(id)+0x9e3779b97f4a7c15))
	b := hashing.Mix64(a + 0x632be59bd9b4e019)
	u1 := (float64(a>>11) + 0.5) / (1 << 53) // (0, 1)
	u2 := float64(b>>11) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	s2 := math.Log1p(sigma * sigma)
	return math.Exp(math.Sqrt(s2)*z - s2/2)
}

// promptBlocks returns the hashed blocks of r the pool tracks: at most one
// per BlockSize tokens of the prompt.
func (e *Engine) promptBlocks(r *Request) []uint64 {
	return r.Blocks[:min(len(r.Blocks), blocksFor(r.Tokens, e.p.BlockSize))]
}

// startStepKV composes the step starting at time t (realistic model), in
// vLLM's order: running requests first, oldest first (decoding sequences
// that need a new block, then prefill chunks), each preempting the newest
// running request while it cannot get its blocks; then, if nothing was
// preempted, admissions from the waiting queue while budget, sequence slots
// and blocks remain.
func (e *Engine) startStepKV(t float64) {
	p := &e.p
	k := e.stepIndex
	bs := p.BlockSize
	for len(e.needs) > 0 && e.needs[0].step <= k {
		n := e.needs.pop()
		r := n.r
		if r.kv.stint != n.stint || r.kv.state != stateDecode {
			continue
		}
		if !e.makeRoom(t, 1, r) {
			continue
		}
		e.pool.alloc(1)
		r.kv.anon++
		if next := n.step + int64(bs); next <= r.kv.finish {
			e.needs.push(need{step: next, seq: n.seq, r: r, stint: n.stint})
		}
	}

	budget := p.MaxBatchedTokens - e.nDecoding
	tokens := 0
	quad := 0.0
	e.stepPrefill = 0
	for i := 0; i < e.prefilling.len() && budget > 0; i++ {
		f := e.prefilling.at(i)
		r := f.r
		chunk := min(f.remaining, budget)
		if more := blocksFor(f.context+chunk, bs) - r.kv.held - r.kv.anon; more > 0 {
			if !e.makeRoom(t, more, r) {
				break // r was the newest running request
			}
			e.pool.alloc(more)
			r.kv.anon += more
		}
		f.schedule(budget, &quad)
		budget -= chunk
		tokens += chunk
		e.stepPrefill += float64(chunk) * r.kv.cost
	}
	preempted := e.preemptedAt == k // vLLM admits nothing in a step that preempted
	dramTokens := 0
	for !preempted && budget > 0 && e.waiting.len() > 0 && e.running() < p.MaxNumSeqs && e.waiting.at(0).at <= t {
		r := e.waiting.at(0).r
		if r == e.blocked && e.pool.gen == e.blockedGen && budget >= e.blockedBudget {
			break // as below, known without looking its blocks up again
		}
		cached, dram, ok := e.admitKV(t, r, budget)
		if !ok {
			e.blocked, e.blockedGen, e.blockedBudget = r, e.pool.gen, budget
			break // out of blocks: the queue waits (FCFS, no skipping)
		}
		e.blocked = nil
		e.waiting.pop()
		e.waitingTokens -= r.kv.queued
		dramTokens += dram
		e.prefilling.push(prefill{r: r, seq: e.seq, remaining: r.kv.computed - cached, context: cached})
		r.kv.seq = e.seq
		e.seq++
		f := e.prefilling.at(e.prefilling.len() - 1)
		chunk := f.schedule(budget, &quad)
		budget -= chunk
		tokens += chunk
		e.stepPrefill += float64(chunk) * r.kv.cost
	}

	done := 0
	for done < e.prefilling.len() && e.prefilling.at(done).remaining == 0 {
		done++
	}
	ctx := e.ctxBase + int64(e.nDecoding)*k // Σ context of the decoding sequences at this step
	e.stepDur = p.DecodeStepBase + p.DecodePerSeq*float64(e.nDecoding) +
		p.DecodePerContextToken*float64(ctx) +
		p.PrefillPerToken*e.stepPrefill + p.PrefillQuadratic*quad +
		p.DRAMLoadPerToken*float64(dramTokens)
	e.stepEnd = t + e.stepDur
	e.stepTokens = tokens
	e.stepDone = done
	e.busy = true
}

// admitKV admits r, the front of the waiting queue, at time t with a
// first chunk of at most budget tokens, if the blocks for its cache hit
// and that chunk are free. It holds the hit blocks and allocates the
// chunk's, and returns the cached and DRAM-tier tokens.
func (e *Engine) admitKV(t float64, r *Request, budget int) (cached, dram int, ok bool) {
	bs := e.p.BlockSize
	blocks := e.promptBlocks(r)
	total := r.kv.computed
	hit := e.pool.prefixLen(blocks)
	// Only prompt blocks have hashes: output tokens generated before a
	// preemption are always computed again.
	cached = min(hit*bs, r.Tokens, total-1)
	chunk := min(total-cached, budget)
	more := max(blocksFor(cached+chunk, bs)-hit, 0)
	if e.pool.holdCost(blocks[:hit])+more > e.pool.free() {
		return 0, 0, false
	}
	for i, h := range blocks[:hit] { // tiers before holding: holding moves blocks
		if e.pool.tier(h) == tierDRAM {
			dram += min(max(cached-i*bs, 0), bs)
		}
	}
	e.pool.holdPrefix(blocks[:hit])
	e.pool.alloc(more)
	r.kv.held, r.kv.anon = hit, more
	r.kv.state = statePrefill
	r.PrefillStart = t
	r.CachedTokens, r.DRAMTokens = cached, dram
	e.pendingTokens += total - cached
	e.stats.Admitted++
	e.stats.PromptTokens += int64(total)
	e.stats.CachedTokens += int64(cached)
	e.stats.DRAMTokens += int64(dram)
	if r.kv.resumed {
		e.stats.RecomputedTokens += int64(total - cached)
	}
	return cached, dram, true
}

// makeRoom preempts the newest running requests until n blocks are free
// for r. It returns false if r itself was preempted (it was the newest).
func (e *Engine) makeRoom(t float64, n int, r *Request) bool {
	for e.pool.free() < n {
		v := e.newest()
		e.preempt(t, v)
		if v == r {
			return false
		}
	}
	return true
}

// newest returns the running request admitted last: the back of the
// prefill queue, else the newest decoding request. Prefills finish in
// admission order, so every decoding request is older than every prefill.
func (e *Engine) newest() *Request {
	if n := e.prefilling.len(); n > 0 {
		return e.prefilling.at(n - 1).r
	}
	for e.decOrder.len() > 0 {
		if d := *e.decOrder.at(e.decOrder.len() - 1); d.live() {
			return d.r
		}
		e.decOrder.popBack()
	}
	return nil // unreachable: callers have a running request
}

// preempt stops running request r at time t, the start of step
// e.stepIndex: its blocks are freed (its hashed blocks become free cached
// blocks, most recent) and it goes back to the front of the waiting queue,
// to prefill its prompt and the output generated so far again.
func (e *Engine) preempt(t float64, r *Request) {
	k := e.stepIndex
	switch r.kv.state {
	case stateDecode:
		r.kv.gen += int(k - 1 - r.kv.decodeAt)
		e.nDecoding--
		e.ctxBase -= int64(r.kv.computed) - r.kv.decodeAt
	case statePrefill:
		f := e.prefilling.popBack() // r is the newest: the back
		e.pendingTokens -= f.remaining
	}
	e.release(r)
	r.kv.stint++
	r.kv.state = stateWaiting
	r.kv.resumed = true
	r.kv.computed = r.Tokens + r.kv.gen
	r.kv.queued = r.kv.computed
	r.Preemptions++
	e.stats.Preemptions++
	e.preemptedAt = k
	e.waitingTokens += r.kv.queued
	e.waiting.pushFront(waiter{r: r, at: t})
}

// release frees r's blocks, deepest first.
func (e *Engine) release(r *Request) {
	blocks := e.promptBlocks(r)
	for i := r.kv.held - 1; i >= 0; i-- {
		e.pool.unhold(blocks[i])
	}
	e.pool.release(r.kv.anon)
	r.kv.held, r.kv.anon = 0, 0
}

// finishStepKV ends the step in progress (realistic model): decoding
// requests due complete, finished prefills register their prompt blocks
// in the prefix cache, emit their first token (not again after a
// preemption) and decode, or complete.
func (e *Engine) finishStepKV(dst []Event) []Event {
	t, k := e.stepEnd, e.stepIndex
	bs := e.p.BlockSize
	for len(e.decoding) > 0 && e.decoding[0].finish <= k {
		d := e.decoding.pop()
		r := d.r
		if d.stint != r.kv.stint || r.kv.state != stateDecode {
			continue
		}
		e.nDecoding--
		e.ctxBase -= int64(r.kv.computed) - r.kv.decodeAt
		dst = e.complete(dst, r, t)
	}
	for range e.stepDone {
		f := e.prefilling.pop()
		r := f.r
		blocks := e.promptBlocks(r)
		for i := r.kv.held; i < len(blocks); i++ {
			e.pool.register(blocks[i])
			r.kv.held++
			r.kv.anon--
		}
		r.kv.gen++ // the prefill step samples a token
		if !r.kv.first {
			r.kv.first = true
			r.FirstToken = t
			dst = append(dst, Event{Kind: FirstToken, Req: r, Time: t})
		}
		if r.kv.gen >= r.Output {
			dst = e.complete(dst, r, t)
			continue
		}
		r.kv.state = stateDecode
		r.kv.decodeAt = k
		r.kv.finish = k + int64(r.Output-r.kv.gen)
		e.nDecoding++
		e.ctxBase += int64(r.kv.computed) - k
		e.decoding.push(decoding{finish: r.kv.finish, seq: f.seq, r: r, stint: r.kv.stint})
		// At step j the sequence's context is computed + j - k tokens; it
		// needs a new block when that exceeds its blocks.
		if j := k + 1 + int64(bs*(r.kv.held+r.kv.anon)-r.kv.computed); j <= r.kv.finish {
			e.needs.push(need{step: j, seq: f.seq, r: r, stint: r.kv.stint})
		}
		e.decOrder.push(decRef{r: r, stint: r.kv.stint})
		if e.decOrder.len() > 2*e.nDecoding+64 {
			e.compactDecOrder()
		}
	}
	e.pendingTokens -= e.stepTokens
	e.stats.Steps++
	e.stats.BusyTime += e.stepDur
	e.stepIndex++
	e.busy = false
	return dst
}

// complete finishes r at time t and frees its blocks.
func (e *Engine) complete(dst []Event, r *Request, t float64) []Event {
	e.release(r)
	r.kv.state = stateDone
	r.Done = t
	e.stats.Completed++
	return append(dst, Event{Kind: Completed, Req: r, Time: t})
}

// compactDecOrder drops the stale entries of decOrder, in place.
func (e *Engine) compactDecOrder() {
	n := e.decOrder.len()
	kept := 0
	for i := range n {
		if d := *e.decOrder.at(i); d.live() {
			*e.decOrder.at(kept) = d
			kept++
		}
	}
	for e.decOrder.len() > kept {
		e.decOrder.popBack()
	}
}
