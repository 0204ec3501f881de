package httpengine

import (
	"sync"

	"github.com/dualmap/dualmap/internal/sim/engine"
)

// progress is what a handler knows of its request. Fields only grow: once
// set, First and Done stay true and Generated never decreases.
type progress struct {
	PromptTokens int     // prompt tokens after truncation (set at submission)
	CachedTokens int     // prefix-cache hit (set with First)
	Generated    int     // output tokens out so far
	First        bool    // the first token is out
	Done         bool    // the last token is out
	Capped       bool    // the engine cut the output at max_model_len (set with Done)
	TTFT         float64 // simulated seconds from submission to the first token
}

// ticket is one request between its handler and Run. Run owns req once it
// is submitted and reports through update; the handler reads load and
// waits on notify. notify holds at most one pending notice, so Run never
// blocks on a handler that went away, and a handler that was slow sees the
// latest progress at once.
type ticket struct {
	req    *engine.Request // owned by Run after submission
	tokens []uint32        // the engine's own token ids, with KV events only
	// received are KV blocks transferred from a prefill instance, which
	// Run puts in the engine's prefix cache before submitting req.
	received []uint64
	notify   chan struct{}

	mu sync.Mutex
	p  progress
}

func newTicket(r *engine.Request) *ticket {
	return &ticket{req: r, notify: make(chan struct{}, 1)}
}

// load returns the progress so far.
func (t *ticket) load() progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// update replaces the progress and notifies the handler without blocking.
func (t *ticket) update(p progress) {
	t.mu.Lock()
	t.p = p
	t.mu.Unlock()
	select {
	case t.notify <- struct{}{}:
	default:
	}
}
