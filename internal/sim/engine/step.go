package engine

// startStep composes the step starting at time t and schedules its end:
// one token for each decoding sequence, then prefill chunks for running
// prefills in FCFS order, then admissions from the waiting queue while
// budget and sequence slots remain. Callers ensure there is work.
func (e *Engine) startStep(t float64) {
	if !e.legacy {
		e.startStepKV(t)
		return
	}
	p := &e.p
	decodeSeqs := len(e.decoding)
	budget := p.MaxBatchedTokens - decodeSeqs
	tokens := 0
	quad := 0.0 // Σ chunk x context at the end of the chunk

	for i := 0; i < e.prefilling.len() && budget > 0; i++ {
		chunk := e.prefilling.at(i).schedule(budget, &quad)
		budget -= chunk
		tokens += chunk
	}
	dramTokens := 0
	for budget > 0 && e.waiting.len() > 0 && e.running() < p.MaxNumSeqs && e.waiting.at(0).at <= t {
		r := e.waiting.pop().r
		e.waitingTokens -= r.Tokens
		e.admit(t, r)
		dramTokens += r.DRAMTokens
		e.prefilling.push(prefill{r: r, seq: e.seq, remaining: r.Tokens - r.CachedTokens, context: r.CachedTokens})
		e.seq++
		chunk := e.prefilling.at(e.prefilling.len()-1).schedule(budget, &quad)
		budget -= chunk
		tokens += chunk
	}

	done := 0
	for done < e.prefilling.len() && e.prefilling.at(done).remaining == 0 {
		done++
	}
	e.stepDur = p.DecodeStepBase + p.DecodePerSeq*float64(decodeSeqs) +
		p.PrefillPerToken*float64(tokens) + p.PrefillQuadratic*quad +
		p.DRAMLoadPerToken*float64(dramTokens)
	e.stepEnd = t + e.stepDur
	e.stepTokens = tokens
	e.stepDone = done
	e.busy = true
}

// schedule gives the request a chunk of at most budget tokens and returns
// its size, adding chunk x context at the chunk's end to quad.
func (f *prefill) schedule(budget int, quad *float64) int {
	chunk := min(f.remaining, budget)
	f.remaining -= chunk
	f.context += chunk
	*quad += float64(chunk) * float64(f.context)
	return chunk
}

// admit starts r's prefill at time t: it decides the cache hit, touches the
// hit blocks (deepest first) and counts the request.
func (e *Engine) admit(t float64, r *Request) {
	bs := e.p.BlockSize
	hit := e.cache.prefixLen(r.Blocks)
	cached := min(hit*bs, r.Tokens-1)
	dram := 0
	for i, h := range r.Blocks[:hit] { // tiers before touching: touches demote other blocks
		if e.cache.tier(h) == tierDRAM {
			dram += min(max(cached-i*bs, 0), bs) // the block's share of the cached tokens
		}
	}
	for i := hit - 1; i >= 0; i-- {
		e.cache.touch(r.Blocks[i])
	}
	r.PrefillStart = t
	r.CachedTokens, r.DRAMTokens = cached, dram
	e.pendingTokens += r.Tokens - cached
	e.stats.Admitted++
	e.stats.PromptTokens += int64(r.Tokens)
	e.stats.CachedTokens += int64(cached)
	e.stats.DRAMTokens += int64(dram)
}

// finishStep ends the step in progress at e.stepEnd: decoding requests due
// at this step complete, requests whose prefill ended emit their first token,
// enter the cache and start decoding (or complete, with Output 1).
func (e *Engine) finishStep(dst []Event) []Event {
	if !e.legacy {
		return e.finishStepKV(dst)
	}
	t, k := e.stepEnd, e.stepIndex
	for len(e.decoding) > 0 && e.decoding[0].finish == k {
		r := e.decoding.pop().r
		r.Done = t
		dst = append(dst, Event{Kind: Completed, Req: r, Time: t})
		e.stats.Completed++
	}
	for range e.stepDone {
		f := e.prefilling.pop()
		r := f.r
		r.FirstToken = t
		dst = append(dst, Event{Kind: FirstToken, Req: r, Time: t})
		e.cache.insert(r.Blocks)
		if r.Output <= 1 {
			r.Done = t
			dst = append(dst, Event{Kind: Completed, Req: r, Time: t})
			e.stats.Completed++
			continue
		}
		e.decoding.push(decoding{finish: k + int64(r.Output) - 1, seq: f.seq, r: r})
	}
	e.pendingTokens -= e.stepTokens
	e.stats.Steps++
	e.stats.BusyTime += e.stepDur
	e.stepIndex++
	e.busy = false
	return dst
}
