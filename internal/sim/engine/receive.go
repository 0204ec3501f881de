package engine

// Receive puts the KV blocks of a prompt prefilled elsewhere into the
// engine's prefix cache, as a prefill/decode deployment's KV transfer does
// before the decode instance admits the request (the caller charges the
// transfer's time): a request with these blocks submitted next finds them
// cached and prefills only its last token. The blocks are free cached
// blocks, most recent first-block-last as a finished prefill leaves them;
// in the realistic model they take free KV blocks (evicting least recent
// cached ones), and those that do not fit (every block held by running
// requests) are not received: the request computes them.
func (e *Engine) Receive(blocks []uint64) {
	if e.legacy {
		e.cache.insert(blocks)
		return
	}
	for i := len(blocks) - 1; i >= 0; i-- { // deepest first: the first block ends most recent
		if e.pool.free() < 1 {
			return
		}
		h := blocks[i]
		e.pool.alloc(1)
		e.pool.register(h)
		e.pool.unhold(h)
	}
}
