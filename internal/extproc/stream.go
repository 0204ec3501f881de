package extproc

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/hashing"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/scheduler"
)

// flow is what a stream needs from its pool's scheduler: route a request
// (waiting in the router queue if need be), report its progress, and pin a
// request that carries no prompt. Called concurrently by every stream;
// EnqueueAndWait blocks until the request is dispatched, shed or ctx ends,
// the others do not block. EnqueueAndWait withdraws the request on every
// error path, so a stream only ever holds a dispatched request, and
// Complete releases it.
type flow interface {
	EnqueueAndWait(ctx context.Context, r *scheduler.Request) (scheduler.Decision, error)
	FirstToken(r *scheduler.Request)
	Complete(r *scheduler.Request)
	AnyReady(n uint64) (string, error)
}

// owed is what a stream still owes its scheduler about the request it
// routed: the progress reports that release the request's load. Every
// state but owesNothing holds the request's load until Complete.
type owed uint8

const (
	owesNothing    owed = iota // holds nothing: not routed, pinned by routeAny, or completed
	owesResponse               // dispatched: the response headers tell what comes next
	owesFirstChunk             // the first non-empty response body chunk is the first token; the body's end completes it
	owesBodyEnd                // the response body's end completes it
	owesStreamEnd              // the stream's end completes it
)

// stream is the processor of one ext_proc stream (one HTTP request): one
// method per message kind, each accepting the message only in the phases
// listed in phase's diagram. Its methods run on the stream's goroutine.
type stream struct {
	s     *Server
	ctx   context.Context
	phase phase

	method, path, contentType string
	sloHeader, session        string
	kind                      openai.Kind // of method and path
	// The request body: size bytes so far, of which body holds those of an
	// inference request (the others are not read) until it is routed; held
	// of them are reserved in the server's bounds.
	body       []byte
	size, held int

	pool       *pool              // set by prepare
	streaming  bool               // set by prepare
	req        *scheduler.Request // the routed request, from its dispatch
	dec        scheduler.Decision // where it went
	dispatched time.Time          // when it went
	owes       owed
	usage      usageScan // the engine's reported prefix reuse (usage.go)
}

func newStream(s *Server, ctx context.Context) *stream {
	return &stream{s: s, ctx: ctx}
}

// handle answers one message with exactly one response of the matching
// kind (a mismatched kind makes Envoy skip ext_proc for the request), or
// with an immediate response; or refuses it with a *protocolError, after
// which the stream accepts nothing. A nil response and nil error mean the
// stream is gone (its context ended while the request waited).
func (st *stream) handle(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	switch v := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.onRequestHeaders(v.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.onRequestBody(v.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return st.onRequestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.onResponseHeaders(v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.onResponseBody(v.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return st.onResponseTrailers()
	}
	return nil, st.refuse(msgUnknown)
}

// refuse ends the stream's processing: m is not accepted in this phase.
func (st *stream) refuse(m message) error {
	err := &protocolError{msg: m, phase: st.phase}
	st.phase = phaseFailed
	return err
}

func headerValue(h *corev3.HeaderValue) string {
	if v := h.GetRawValue(); len(v) > 0 {
		return string(v)
	}
	return h.GetValue()
}

func (st *stream) onRequestHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseRequestHeaders {
		return nil, st.refuse(msgRequestHeaders)
	}
	cfg := &st.s.cfg.Routing
	declared := -1 // content-length
	for _, kv := range h.GetHeaders().GetHeaders() {
		switch strings.ToLower(kv.GetKey()) {
		case ":method":
			st.method = headerValue(kv)
		case "content-length":
			if n, err := strconv.ParseInt(headerValue(kv), 10, 64); err == nil && n >= 0 {
				declared = int(min(n, math.MaxInt32))
			}
		case ":path":
			st.path = headerValue(kv)
		case "content-type":
			st.contentType = headerValue(kv)
		case cfg.SLOHeader:
			st.sloHeader = headerValue(kv)
		case cfg.SessionHeader:
			if cfg.SessionHeader != "" {
				st.session = headerValue(kv)
			}
		}
	}
	st.kind = openai.Classify(st.method, st.path)
	if h.GetEndOfStream() {
		return st.routeAny(true), nil
	}
	if limit := st.s.cfg.Limits.MaxBodyBytes; declared > limit {
		// Answered before Envoy sends (and buffers) the body.
		st.s.m.rejections.WithLabelValues(limitBody).Inc()
		return st.fail(bodyTooLarge(limit)), nil
	}
	// A client-supplied destination never survives: strip it now, and the
	// body answer overwrites it again. Every body is pinned at its end
	// (one we do not parse, of another POST path, by routeAny).
	st.phase = phaseRequestBody
	return continueHeaders(&extprocv3.HeaderMutation{RemoveHeaders: []string{cfg.Header}}), nil
}

// routeAny pins a request that carries no prompt to any ready instance of
// the default pool (or the first pool). The stream holds nothing in the
// scheduler for it, and its response is not attributed to the instance's
// health: such paths (model listings, endpoints the router does not parse)
// say little about serving inference, and the active health checks watch
// the instance anyway.
func (st *stream) routeAny(headersPhase bool) *extprocv3.ProcessingResponse {
	p := st.s.def
	if p == nil {
		p = st.s.pools[0]
	}
	id, err := p.flow.AnyReady(st.s.seq.Add(1))
	if err != nil {
		return st.fail(err)
	}
	st.phase = phaseDispatched
	st.s.m.decisions.WithLabelValues(p.name, p.policy, "any").Inc()
	m := st.pin(scheduler.Decision{Instance: id})
	if headersPhase {
		resp := continueHeaders(m)
		resp.DynamicMetadata = st.metadata(scheduler.Decision{Instance: id})
		return resp
	}
	resp := continueBody(m)
	resp.DynamicMetadata = st.metadata(scheduler.Decision{Instance: id})
	return resp
}

// onRequestBody collects the body; its end routes the request, once: a
// body after the end-of-stream one is refused (it would route again and
// leak the first request's load). A chunk that would take the body over
// limits.max_body_bytes gets 413, on any path, and one that would take the
// bodies of all streams over limits.max_buffered_bytes gets 429; neither
// is kept.
func (st *stream) onRequestBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseRequestBody {
		return nil, st.refuse(msgRequestBody)
	}
	chunk, limit := b.GetBody(), st.s.cfg.Limits.MaxBodyBytes
	if len(chunk) > limit-st.size {
		st.s.m.rejections.WithLabelValues(limitBody).Inc()
		return st.fail(bodyTooLarge(limit)), nil
	}
	st.size += len(chunk)
	if st.kind != openai.KindOther && len(chunk) > 0 {
		if !st.s.bounds.reserve(len(chunk)) {
			st.s.m.rejections.WithLabelValues(limitBuffered).Inc()
			return st.fail(errBufferFull), nil
		}
		st.held += len(chunk)
		if st.body == nil && b.GetEndOfStream() {
			st.body = chunk // the whole body in one message (BUFFERED): no copy
		} else {
			st.body = append(st.body, chunk...)
		}
	}
	if !b.GetEndOfStream() {
		return continueBody(nil), nil
	}
	if st.kind == openai.KindOther {
		return st.routeAny(false), nil
	}
	start := time.Now()
	r, err := st.prepare()
	st.dropBody() // what routing needs of it is in r
	st.s.m.tokenize.Observe(time.Since(start).Seconds())
	if err != nil {
		return st.fail(err), nil
	}
	p := st.pool
	start = time.Now()
	dec, err := p.flow.EnqueueAndWait(st.ctx, r)
	if err != nil {
		// The scheduler holds nothing of a request it shed or that was
		// cancelled while waiting.
		if st.ctx.Err() != nil {
			st.phase = phaseFailed
			return nil, nil // the stream is gone
		}
		return st.fail(err), nil
	}
	st.phase = phaseDispatched
	st.req, st.dec, st.dispatched, st.owes = r, dec, time.Now(), owesResponse
	if dec.Waited > 0 {
		st.s.m.queueWait.WithLabelValues(p.name).Observe(dec.Waited.Seconds())
	}
	st.s.m.decide.Observe((time.Since(start) - dec.Waited).Seconds())
	p.store.Dispatched(dec.Instance, r.Blocks) // for the other replicas' cache index
	st.s.m.decisions.WithLabelValues(p.name, p.policy, dec.Reason.String()).Inc()
	st.s.m.promptTok.WithLabelValues(p.name).Add(float64(r.Tokens))
	st.s.m.cachedTok.WithLabelValues(p.name).Add(float64(dec.CachedTokens))
	resp := continueBody(st.pin(dec))
	resp.DynamicMetadata = st.metadata(dec)
	return resp, nil
}

// onRequestTrailers ends a request whose body had no end-of-stream message
// (trailers follow the last chunk): it is not routed, and Envoy forwards it
// without a pin, as it would a request the router never saw.
func (st *stream) onRequestTrailers() (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseRequestBody {
		return nil, st.refuse(msgRequestTrailers)
	}
	st.phase = phaseDispatched
	st.dropBody()
	st.s.log.Debug("request trailers ended the body unrouted; forwarded without a pin", "path", st.path)
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}, nil
}

// prepare parses the body and tokenizes the prompt into a scheduler request.
func (st *stream) prepare() (*scheduler.Request, error) {
	cfg := st.s.cfg
	body, err := openai.Parse(st.method, st.path, st.contentType, st.body, openai.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes})
	if err != nil {
		return nil, err
	}
	p, err := st.s.poolFor(body.Model)
	if err != nil {
		return nil, err
	}
	st.pool = p
	st.streaming = body.Stream
	slo, err := cfg.SLOFor(st.sloHeader)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errBadSLO, cfg.Routing.SLOHeader, err)
	}
	var prompt tokenize.Prompt
	if len(body.Messages) > 0 {
		msgs := make([]tokenize.Message, len(body.Messages))
		for i, m := range body.Messages {
			msgs[i] = tokenize.Message{Role: m.Role, Content: m.Content}
		}
		err = p.prompter.Messages(msgs, &prompt)
	} else if len(body.Prompts) > 0 {
		err = p.prompter.Text(body.Prompts[0], &prompt)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errTokenize, err)
	}
	r := &scheduler.Request{Blocks: prompt.Blocks, Tokens: prompt.Tokens, SLO: slo}
	if st.session != "" {
		r.Session = hashing.SessionKey(st.session)
	}
	return r, nil
}

// destination is the header value for a decision.
func (st *stream) destination(dec scheduler.Decision) string {
	if st.s.cfg.Routing.Mode == config.ModeOriginalDst || dec.Fallback == "" {
		return dec.Instance
	}
	return dec.Instance + "," + dec.Fallback
}

// pin is the header mutation that steers Envoy to the decision.
func (st *stream) pin(dec scheduler.Decision) *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header(st.s.cfg.Routing.Header, st.destination(dec))}}
}

func (st *stream) metadata(dec scheduler.Decision) *structpb.Struct {
	if st.s.cfg.Routing.Mode != config.ModeOverrideHost {
		return nil
	}
	return lbMetadata(st.s.cfg.Routing.Header, st.destination(dec))
}

// upstreamHostHeader is set by Envoy's route (response_headers_to_add:
// %UPSTREAM_HOST%) to the endpoint that really served: the fallback when
// the primary could not be reached.
const upstreamHostHeader = "x-dualmap-upstream-host"

// onResponseHeaders sees the response start: the upstream's answer to a
// dispatched request, or Envoy's own answer to one whose body it never
// delivered (a local reply, e.g. 413 over its buffer limit), which is
// attributed to nothing.
func (st *stream) onResponseHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseDispatched && st.phase != phaseRequestBody {
		return nil, st.refuse(msgResponseHeaders)
	}
	if st.phase == phaseRequestBody {
		st.dropBody()
		st.s.log.Debug("response before the request body ended: Envoy answered itself, or its request_body_mode is not BUFFERED", "path", st.path)
	}
	st.phase = phaseResponse
	if h.GetEndOfStream() {
		st.phase = phaseDone
	}
	code, served := 0, ""
	for _, kv := range h.GetHeaders().GetHeaders() {
		switch kv.GetKey() {
		case ":status":
			code, _ = strconv.Atoi(headerValue(kv))
		case upstreamHostHeader:
			served = headerValue(kv)
		}
	}
	if st.owes == owesResponse {
		st.responseStarted(code, served)
	}
	m := &extprocv3.HeaderMutation{RemoveHeaders: []string{upstreamHostHeader}}
	if st.s.cfg.Routing.DebugHeaders && st.dec.Instance != "" {
		m.SetHeaders = []*corev3.HeaderValueOption{
			header("x-dualmap-instance", st.dec.Instance),
			header("x-dualmap-reason", st.dec.Reason.String()),
			header("x-dualmap-cached-tokens", strconv.Itoa(st.dec.CachedTokens)),
		}
	}
	return continueResponseHeaders(m), nil
}

// responseStarted handles the upstream's status: health attribution, and
// the scheduler's view of the request.
func (st *stream) responseStarted(code int, served string) {
	p := st.pool
	st.s.m.firstByte.WithLabelValues(p.name).Observe(time.Since(st.dispatched).Seconds())
	served = st.servedBy(served)
	if served != st.dec.Instance {
		// Envoy retried on the fallback: the primary was unreachable.
		st.s.upstreamFailed(p, st.dec.Instance)
	}
	switch {
	case code >= 500:
		st.s.upstreamFailed(p, served)
	case code >= 200 && code < 300:
		st.s.upstreamOK(p, served)
	}
	ok := code >= 200 && code < 300
	if ok {
		st.usage.start(served)
	}
	switch {
	case ok && st.s.cfg.Routing.ResponseBody == "streamed" && st.streaming:
		st.owes = owesFirstChunk // first token and end come with the body
	case ok && st.s.cfg.Routing.ResponseBody == "streamed":
		st.owes = owesBodyEnd // the end comes with the body
	case ok && st.streaming:
		st.settle(false) // headers are the best first-token signal we get
		st.owes = owesStreamEnd
	default:
		st.settle(true)
	}
}

// servedBy returns the instance that served the request, given the
// upstreamHostHeader Envoy reported. The header is believed only when it
// names the decision's instance or fallback or a member of the pool; an
// address the router does not know is ignored (and counted), as if Envoy
// had not reported one: the decision's instance served.
func (st *stream) servedBy(host string) string {
	switch host {
	case "", st.dec.Instance:
		return st.dec.Instance
	case st.dec.Fallback:
		return host
	}
	if st.pool.member(host) {
		return host
	}
	st.s.m.hostIgnored.WithLabelValues(st.pool.name).Inc()
	st.s.log.Debug("upstream host is no member of the pool; ignored for health", "pool", st.pool.name,
		"header", upstreamHostHeader, "host", host, "instance", st.dec.Instance)
	return st.dec.Instance
}

// onResponseBody sees a streamed response body chunk: the first non-empty
// chunk of a streaming response is its first token; the last one ends it.
func (st *stream) onResponseBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseResponse {
		return nil, st.refuse(msgResponseBody)
	}
	st.usage.feed(b.GetBody())
	if b.GetEndOfStream() {
		st.phase = phaseDone
		st.usageEnded()
	}
	if st.owes == owesFirstChunk && len(b.GetBody()) > 0 {
		st.settle(false)
		st.owes = owesBodyEnd
	}
	if b.GetEndOfStream() && (st.owes == owesFirstChunk || st.owes == owesBodyEnd) {
		st.settle(true)
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}, nil
}

// onResponseTrailers ends the response (its body, if any, had no
// end-of-stream chunk).
func (st *stream) onResponseTrailers() (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseResponse {
		return nil, st.refuse(msgResponseTrailers)
	}
	st.phase = phaseDone
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}, nil
}

// settle reports the request's progress to the scheduler: its prefill is
// done (FirstToken; it feeds the TTFT estimator), or it is over (Complete,
// which releases its load; the stream then owes nothing).
func (st *stream) settle(done bool) {
	if done {
		st.pool.flow.Complete(st.req)
		st.owes = owesNothing
	} else {
		st.pool.flow.FirstToken(st.req)
	}
}

// finish runs when the stream ends: the response is over, the client left,
// or a message was refused. It releases whatever the request still holds
// in the scheduler (only a dispatched request is ever held: Complete).
func (st *stream) finish() {
	st.dropBody()
	st.usageEnded()
	if st.owes != owesNothing {
		st.settle(true)
	}
}

// dropBody lets go of the request body and gives its bytes back to the
// server's budget.
func (st *stream) dropBody() {
	st.body = nil
	st.s.bounds.release(st.held)
	st.held = 0
}

// fail answers with the error and counts it. The stream accepts nothing
// more, and keeps no body.
func (st *stream) fail(err error) *extprocv3.ProcessingResponse {
	st.phase = phaseFailed
	st.dropBody()
	e := classify(err, time.Second)
	st.s.m.errors.WithLabelValues(e.kind).Inc()
	st.s.log.Debug("request rejected", "kind", e.kind, "status", e.status, "path", st.path, "error", err)
	return immediate(e)
}

var _ flow = (*scheduler.Scheduler)(nil)
