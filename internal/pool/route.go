package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dualmap/dualmap/internal/chattmpl"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/scheduler"
)

// ErrTokenize is a prompt the pool's tokenizer could not take.
var ErrTokenize = errors.New("pool: tokenization failed")

// Controls are a request's routing controls, as the protocol decided them
// from its route and headers.
type Controls struct {
	SLO      time.Duration // the TTFT objective (0: the scheduler's default)
	Priority int           // higher first
	Session  uint64        // session key (hashing.SessionKey), 0 without one
	Only     []string      // the instances the request may go to (nil: any)
}

// Observer is told of the steps of one Route call, on the caller's
// goroutine (the protocol's per-request recorder implements it).
type Observer interface {
	// Tokenized is told when tokenization is over:
	// r is the request about to be routed, or nil with the error. It may
	// set r.Explain to have the decision explained (and must clear it
	// once Route has returned).
	Tokenized(r *scheduler.Request, err error)
}

// Route tokenizes body's prompt and routes the request: it waits in the
// router queue if need be and returns the ticket of the dispatched
// request, or the error: ErrTokenize, the scheduler's shedding
// (scheduler.ErrShed, ErrNoEndpoint, ErrQueueTimeout, ErrLate) or ctx's.
// On every error path the request holds nothing. The dispatch is recorded
// for the other replicas. Safe for concurrent use; it blocks.
func (p *Pool) Route(ctx context.Context, body *openai.Request, c Controls, obs Observer) (*Ticket, error) {
	t := &Ticket{p: p}
	err := p.request(body, c, &t.req)
	if err != nil {
		obs.Tokenized(nil, err)
		return nil, err
	}
	obs.Tokenized(&t.req, nil)
	if t.dec, err = p.sched.EnqueueAndWait(ctx, &t.req); err != nil {
		return nil, err
	}
	t.at = time.Now()
	p.coord.Dispatched(t.dec.Instance, t.req.Blocks) // for the other replicas' cache index
	if p.pd != nil {
		p.routePD(ctx, t) // pd.go: the decider, and the prefill instance
	}
	return t, nil
}

// Tokenize returns the request Route would route for body and c, without
// routing it (tools and tests: what the scheduler would be asked).
func (p *Pool) Tokenize(body *openai.Request, c Controls) (*scheduler.Request, error) {
	r := new(scheduler.Request)
	if err := p.request(body, c, r); err != nil {
		return nil, err
	}
	return r, nil
}

// request tokenizes body's prompt into r.
func (p *Pool) request(body *openai.Request, c Controls, r *scheduler.Request) error {
	var prompt tokenize.Prompt
	var err error
	if len(body.Messages) > 0 {
		msgs := make([]tokenize.Message, len(body.Messages))
		for i, m := range body.Messages {
			msgs[i] = tokenize.Message{Role: m.Role, Content: m.Content}
		}
		err = p.prompter.Chat(msgs, tokenize.ChatOptions{NoGenerationPrompt: body.NoGenerationPrompt,
			ContinueFinalMessage: body.ContinueFinalMessage, TemplateKwargs: body.TemplateKwargs}, &prompt)
	} else if len(body.Prompts) > 0 {
		err = p.prompter.Text(body.Prompts[0], &prompt)
	}
	if err != nil {
		if errors.Is(err, chattmpl.ErrRender) {
			p.m.m.renderErrors.WithLabelValues(p.name).Inc()
		}
		return fmt.Errorf("%w: %v", ErrTokenize, err)
	}
	*r = scheduler.Request{Blocks: prompt.Blocks, Tokens: prompt.Tokens, SLO: c.SLO, Only: c.Only, Priority: c.Priority, Session: c.Session}
	return nil
}

// Pin returns a ready instance for a request that carries no prompt (model
// listings, paths the router does not parse), allowed by only (nil: any).
// Such a request holds nothing and its response says nothing about the
// instance's health: there is no ticket.
func (p *Pool) Pin(only []string) (string, error) {
	return p.sched.AnyReadyOf(p.seq.Add(1), only)
}

// Ticket is a dispatched request: what the protocol reports of its
// response, and what releases its load. The protocol calls Responded once
// when the response starts, FirstToken when the first token is seen and
// Done when the request is over, on every path (success, an error status,
// the client gone, the stream failed): Done releases the load exactly
// once, whatever came before. A ticket is used by one goroutine.
type Ticket struct {
	p     *Pool
	req   scheduler.Request
	dec   scheduler.Decision
	at    time.Time // dispatched
	resp  bool      // Responded was called
	first bool      // FirstToken was called
	done  bool

	// A P/D pool's prefill half (pd.go).
	pre      scheduler.Request // the request as the prefill scheduler routed it
	prefill  string            // the prefill instance, or "" when the decode instance prefills
	pdReason string            // the decider's reason
	preDone  bool              // the prefill half was released
}

// Pool is the pool that routed the request.
func (t *Ticket) Pool() *Pool { return t.p }

// Request is the routed request (its tokens, blocks and controls).
func (t *Ticket) Request() *scheduler.Request { return &t.req }

// Decision is where the request went and why.
func (t *Ticket) Decision() scheduler.Decision { return t.dec }

// Dispatched is when the request was dispatched.
func (t *Ticket) Dispatched() time.Time { return t.at }

// Responded takes the response's start: its HTTP status and the endpoint
// the proxy reports as having served it ("" when it reports none). A 5xx
// counts against the serving instance, which is taken out at once or after
// several in a row (health.go); an endpoint other than the
// decision's instance means the proxy fell back: the primary was
// unreachable and is taken out, and a success there records the prompt as
// cached where it was served (locally and for the other replicas). It
// returns the instance credited with serving: the decision's unless the
// report names its fallback or, when fromProxy (the proxy's own metadata,
// not a header), another member of the pool (anything else is ignored and
// counted: see servedBy). A second call only
// returns that instance again.
func (t *Ticket) Responded(status int, served string, fromProxy bool) string {
	p := t.p
	served = t.servedBy(served, fromProxy)
	if t.resp || t.done {
		return served
	}
	t.resp = true
	ok := status >= 200 && status < 300
	if served != t.dec.Instance {
		p.failed(t.dec.Instance)
		if ok {
			p.served(served, t.req.Blocks)
		}
	}
	switch {
	case t.pdFailed(status):
		// pd.go: the sidecar's 5xx is its prefill instance's
	case status >= 500:
		p.answered5xx(served, status)
	case ok:
		p.succeeded(served)
	}
	return served
}

// servedBy returns the instance that served, given the endpoint reported:
// by the proxy itself in its served-endpoint metadata (fromProxy), or in
// the upstream-host header the shipped routes write over whatever the
// upstream sent. The metadata is believed when it names the decision's
// instance or fallback or a member of the pool (a gateway's own balancing
// may have picked another); the header only when it names the decision's
// instance or fallback, the only hosts Envoy's override_host policy tries,
// so that a model server that sets it itself (where no route overwrites
// it) cannot charge its failures, or credit its cache, to another
// instance. Anything else is ignored (and counted): the decision's
// instance served.
func (t *Ticket) servedBy(host string, fromProxy bool) string {
	switch host {
	case "", t.dec.Instance:
		return t.dec.Instance
	case t.dec.Fallback:
		return host
	}
	p := t.p
	if fromProxy && p.Member(host) {
		return host
	}
	p.m.m.hostIgnored.WithLabelValues(p.name).Inc()
	p.m.log.Debug("upstream host is no member of the pool; ignored for health", "pool", p.name,
		"host", host, "instance", t.dec.Instance)
	return t.dec.Instance
}

// served records that the pool member id served a request of these blocks
// that was pinned elsewhere.
func (p *Pool) served(id string, blocks []uint64) {
	if err := p.coord.Served(id, blocks); err != nil {
		p.m.log.Debug("served endpoint not recorded", "pool", p.name, "instance", id, "error", err)
	}
}

// FirstToken reports the request's first token (its prefill is done: it
// feeds the TTFT estimator). Once; nothing after Done.
func (t *Ticket) FirstToken() {
	if t.done || t.first {
		return
	}
	t.first = true
	t.p.sched.FirstToken(&t.req)
	t.prefillDone(true)
}

// Done reports the request over and releases its load. Idempotent.
func (t *Ticket) Done() {
	if t.done {
		return
	}
	t.done = true
	t.p.sched.Complete(&t.req)
	t.pdDone()
}
