package extproc

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// owed is what a stream still owes its pool about the request it routed:
// the progress reports on its ticket. Every state but owesNothing holds
// the request's load until the ticket is Done.
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

	// The request's head, read in the headers phase: what the body's parser
	// needs, and the request's controls, decided there.
	method, path, contentType string
	kind                      openai.Kind // of method and path
	ctl                       controls
	// The request body: size bytes so far, of which body holds those of an
	// inference request (the others are not read) until it is routed; held
	// of them are reserved in the server's bounds.
	body       []byte
	size, held int
	client     string    // the downstream's address (source.address), or ""
	bodyStart  time.Time // when the request headers said a body follows
	opened     time.Time // when the stream was admitted

	declared int // the request's content-length, or -1

	// Body modes (duplex.go): announced by Envoy in the first message.
	announced      bool // protocol_config was sent
	duplex         bool // request body FULL_DUPLEX_STREAMED: the headers answer waits for the body's end
	duplexResponse bool // response body FULL_DUPLEX_STREAMED: chunks are echoed back
	responseBody   bool // announced: the response body is sent to the router
	bufferedBody   bool // announced: request body BUFFERED (or BUFFERED_PARTIAL): one message is all of it
	trailersFollow bool // the body ended without end_of_stream: request trailers may follow the pin
	echo           echo // what is still owed after the last answer

	// The routing, from the body phase on.
	pool      *pool.Pool   // the request's pool: the route's, or its model's
	streaming bool         // the body asks for a streamed response
	tk        *pool.Ticket // the dispatched request, or nil
	owes      owed
	usage     usageScan // the engine's reported prefix reuse (usage.go)
	rec       recorder  // the request's metrics and trace (record.go)
}

func newStream(s *Server, ctx context.Context) *stream {
	return &stream{s: s, ctx: ctx, declared: -1, opened: time.Now(), rec: recorder{s: s}}
}

// handle answers one message with exactly one response of the matching
// kind (a mismatched kind makes Envoy skip ext_proc for the request), or
// with an immediate response; or refuses it with a *protocolError, after
// which the stream accepts nothing. A nil response and nil error mean
// nothing is sent now: the stream is gone (its context ended while the
// request waited), or, in full duplex, a request body chunk is held until
// the body ends. In full duplex an answer may be followed by more messages
// the stream owes (next): the request body after the headers answer, the
// rest of a large response chunk.
func (st *stream) handle(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if st.phase == phaseRequestHeaders {
		if pc := req.GetProtocolConfig(); pc != nil {
			st.protocol(pc)
		}
		st.client = clientAddress(req.GetAttributes())
	}
	switch v := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.onRequestHeaders(v.RequestHeaders, req.GetMetadataContext())
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.onRequestBody(v.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return st.onRequestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.onResponseHeaders(v.ResponseHeaders, req.GetMetadataContext())
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
	st.rec.refused(st.phase)
	st.phase = phaseFailed
	return err
}

func headerValue(h *corev3.HeaderValue) string {
	if v := h.GetRawValue(); len(v) > 0 {
		return string(v)
	}
	return h.GetValue()
}

func (st *stream) onRequestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseRequestHeaders {
		return nil, st.refuse(msgRequestHeaders)
	}
	rs, err := st.readRouteSettings(md)
	if err != nil {
		return st.fail(err), nil
	}
	subset, err := subsetHint(md)
	if err != nil {
		return st.fail(err), nil
	}
	cfg := &st.s.cfg.Routing
	sessionHeader := rs.sessionHeaderOr(cfg.SessionHeader)
	var asked askedControls
	for _, kv := range h.GetHeaders().GetHeaders() {
		switch strings.ToLower(kv.GetKey()) {
		case ":method":
			st.method = headerValue(kv)
		case "content-length":
			if n, err := strconv.ParseInt(headerValue(kv), 10, 64); err == nil && n >= 0 {
				st.declared = int(min(n, math.MaxInt32))
			}
		case ":path":
			st.path = headerValue(kv)
		case "content-type":
			st.contentType = headerValue(kv)
		case cfg.SLOHeader:
			asked.slo = headerValue(kv)
		case ttftHeader:
			asked.ttft = headerValue(kv)
		case objectiveHeader, legacyObjectiveHeader:
			asked.objective = headerValue(kv)
		case sessionHeader:
			if sessionHeader != "" {
				asked.session = headerValue(kv)
			}
		case cfg.PriorityHeader:
			asked.priority = headerValue(kv)
		}
	}
	st.kind = openai.Classify(st.method, st.path)
	st.rec.started(st.ctx, h, st.method, st.path)
	// The controls are decided here, once: a bad one is refused before
	// any body chunk is kept. A request that carries no prompt has none
	// but its route's pool and the subset.
	st.ctl = controls{rs: rs, pool: st.s.pools.Named(rs.pool), route: pool.Controls{Only: subset}}
	if st.kind != openai.KindOther {
		if err := st.s.decideControls(&st.ctl, asked); err != nil {
			return st.fail(err), nil
		}
	}
	if h.GetEndOfStream() {
		return st.routeAny(), nil
	}
	if limit := st.s.cfg.Limits.MaxBodyBytes; st.declared > limit {
		// Answered before Envoy sends (and buffers) the body.
		st.rec.rejected(limitBody)
		return st.fail(bodyTooLarge(limit)), nil
	}
	// A client-supplied destination never survives: strip it now, and the
	// body answer overwrites it again. Every body is pinned at its end
	// (one we do not parse, of another POST path, by routeAny).
	st.phase = phaseRequestBody
	st.bodyStart = time.Now()
	if st.duplex {
		return nil, nil // answered with the pin when the body has ended
	}
	return continueHeaders(&extprocv3.HeaderMutation{RemoveHeaders: st.s.strip}), nil
}

// routeAny pins a request that carries no prompt to any ready instance of
// the default pool (or the first pool). The stream holds nothing in the
// scheduler for it, and its response is not attributed to the instance's
// health: such paths (model listings, endpoints the router does not parse)
// say little about serving inference, and the active health checks watch
// the instance anyway.
func (st *stream) routeAny() *extprocv3.ProcessingResponse {
	p := st.ctl.pool
	if p == nil {
		p = st.s.pools.Default()
	}
	id, err := p.Pin(st.ctl.route.Only)
	if err != nil {
		return st.fail(err)
	}
	st.rec.pinned(p)
	return st.forward(scheduler.Decision{Instance: id})
}

// forward answers a request routed to dec: with the pin in the answer to
// the message that ended the request (its headers, or the end of a
// buffered body), or, in full duplex, in the held headers answer, followed
// by the body (next).
func (st *stream) forward(dec scheduler.Decision) *extprocv3.ProcessingResponse {
	headersPhase := st.phase == phaseRequestHeaders
	st.phase = phaseDispatched
	m := st.pin(dec)
	var resp *extprocv3.ProcessingResponse
	switch {
	case st.duplex:
		st.contentLength(m)
		resp = continueHeaders(m)
		resp.GetRequestHeaders().Response.ClearRouteCache = true
	case headersPhase:
		resp = continueHeaders(m)
	default:
		resp = continueBody(m)
	}
	resp.DynamicMetadata = st.metadata(dec)
	return resp
}

// onRequestBody collects the body; its end routes the request, once: a
// body after the end-of-stream one is refused (it would route again and
// leak the first request's load). A chunk that would take the body over
// limits.max_body_bytes gets 413, on any path, and one that would take the
// bodies of all streams over limits.max_buffered_bytes gets 429; neither
// is kept. In full duplex every chunk is held (it goes back to Envoy after
// the pin) and none is answered before the body's end.
func (st *stream) onRequestBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if st.phase != phaseRequestBody {
		return nil, st.refuse(msgRequestBody)
	}
	if resp := st.collect(b.GetBody(), b.GetEndOfStream()); resp != nil {
		return resp, nil
	}
	switch {
	case b.GetEndOfStream():
		return st.bodyEnded(true), nil
	case st.bufferedBody:
		// Envoy buffers the whole body into this one message; without
		// end_of_stream, request trailers ended it (and come next when the
		// filter sends them). Routed now: nothing else is coming.
		st.trailersFollow = true
		return st.bodyEnded(false), nil
	case st.duplex:
		return nil, nil
	}
	return continueBody(nil), nil
}

// collect takes one body chunk, or answers the request with 413 or 429.
func (st *stream) collect(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	limit := st.s.cfg.Limits.MaxBodyBytes
	if len(chunk) > limit-st.size {
		st.rec.rejected(limitBody)
		return st.fail(bodyTooLarge(limit))
	}
	st.size += len(chunk)
	if (st.kind == openai.KindOther && !st.duplex) || len(chunk) == 0 {
		return nil
	}
	if limit := st.s.bounds.reserve(st.client, len(chunk)); limit != "" {
		st.rec.rejected(limit)
		return st.fail(errBufferFull)
	}
	st.held += len(chunk)
	if st.body == nil && eos {
		st.body = chunk // the whole body in one message (BUFFERED): no copy
	} else {
		st.body = append(st.body, chunk...)
	}
	return nil
}

// bodyEnded routes the request whose body has ended: with end_of_stream
// (eos), or with request trailers. In full duplex the body then goes back
// to Envoy after the pin.
func (st *stream) bodyEnded(eos bool) *extprocv3.ProcessingResponse {
	var resp *extprocv3.ProcessingResponse
	if st.kind == openai.KindOther {
		resp = st.routeAny()
	} else {
		resp = st.route()
	}
	if st.phase != phaseDispatched {
		return resp // an immediate response, or the stream is gone
	}
	if st.duplex {
		st.echoRequest(eos)
	} else {
		st.dropBody()
	}
	return resp
}

// route parses the body and routes the request through its pool, waiting
// in the router queue if need be; it answers with the pin, or with the
// error. A nil answer means the stream is gone.
func (st *stream) route() *extprocv3.ProcessingResponse {
	start := time.Now()
	body, err := openai.Parse(st.method, st.path, st.contentType, st.body, openai.Limits{MaxBodyBytes: st.s.cfg.Limits.MaxBodyBytes})
	if err == nil {
		st.pool = st.ctl.pool
		if st.pool == nil {
			st.pool, err = st.s.pools.ForModel(body.Model)
		}
	}
	if err != nil {
		if !st.duplex {
			st.dropBody()
		}
		st.rec.tokenized(start, st.kind, st.pool, nil, err)
		return st.fail(err)
	}
	st.streaming = body.Stream
	st.rec.model(body.Model)
	obs := observer{rec: st.rec, start: start, kind: st.kind, pool: st.pool, bounds: st.s.bounds, client: st.client}
	if !st.duplex { // let go of the body once tokenized: what routing needs of it is in the request
		obs.held, st.held = st.held, 0
	}
	tk, err := st.pool.Route(st.ctx, body, st.ctl.route, &obs)
	if !st.duplex {
		st.body = nil
		st.s.bounds.release(st.client, obs.held) // if Tokenized did not
	}
	switch {
	case err != nil && obs.decideAt.IsZero():
		return st.fail(err) // parse or tokenization
	case err != nil:
		// The pool holds nothing of a request it shed or that was
		// cancelled while waiting.
		e := st.rec.shed(st.pool, obs.decideAt, err)
		if st.ctx.Err() != nil {
			st.phase = phaseFailed
			return nil // the stream is gone
		}
		return st.failWith(e, err)
	}
	st.tk, st.owes = tk, owesResponse
	st.rec.decided(st.pool, obs.decideAt, tk)
	return st.forward(tk.Decision())
}

// observer is the stream's pool.Observer for one Route call. It holds
// copies of what it needs, not the stream (which then stays on its
// goroutine's stack): the recorder, and the body bytes it gives back to
// the server's budget once the prompt is tokenized (0 in full duplex,
// where the body is held until echoed).
type observer struct {
	rec      recorder
	start    time.Time // the body's parse began
	kind     openai.Kind
	pool     *pool.Pool
	bounds   *bounds
	client   string
	held     int       // body bytes still reserved for the stream
	decideAt time.Time // the tokenized request went to the scheduler (zero: tokenization failed)
}

// Tokenized implements pool.Observer.
func (o *observer) Tokenized(r *scheduler.Request, err error) {
	o.bounds.release(o.client, o.held)
	o.held = 0
	o.rec.tokenized(o.start, o.kind, o.pool, r, err)
	if err == nil {
		o.decideAt = time.Now()
	}
}

// onRequestTrailers ends a request whose body had no end-of-stream message
// (trailers follow the last chunk). In full duplex the body is complete:
// the request is routed as at an end-of-stream chunk, and the trailers
// answer follows the echoed body. A buffered body was routed at its one
// message (onRequestBody); its trailers are answered as they come. In the
// other modes (STREAMED, or no protocol_config) the body chunks have been
// answered and the request can no longer be pinned: it gets 400 rather
// than going upstream unrouted.
func (st *stream) onRequestTrailers() (*extprocv3.ProcessingResponse, error) {
	switch {
	case st.phase == phaseDispatched && st.trailersFollow:
		st.trailersFollow = false
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}, nil
	case st.phase != phaseRequestBody:
		return nil, st.refuse(msgRequestTrailers)
	case st.duplex:
		return st.bodyEnded(false), nil
	}
	return st.fail(errTrailersUnrouted), nil
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
	m := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header(st.s.cfg.Routing.Header, st.destination(dec))}}
	st.pinPD(m) // pd.go: the prefill instance of a P/D pool
	st.rec.inject(m)
	return m
}

// metadata is the envoy.lb dynamic metadata of the pin: the same value as
// its header, as the endpoint picker protocol asks.
func (st *stream) metadata(dec scheduler.Decision) *structpb.Struct {
	return lbMetadata(st.s.cfg.Routing.Header, st.destination(dec))
}

// upstreamHostHeader is set by Envoy's route (response_headers_to_add:
// %UPSTREAM_HOST%) to the endpoint that really served: the fallback when
// the primary could not be reached.
const upstreamHostHeader = "x-dualmap-upstream-host"

// Where the endpoint that served a response was learnt (the source label
// of dualmap_served_reports_total).
const (
	servedFromMetadata = "metadata"
	servedFromHeader   = "header"
	servedFromNone     = "none"
)

// onResponseHeaders sees the response start: the upstream's answer to a
// dispatched request, or Envoy's own answer to one whose body it never
// delivered (a local reply, e.g. 413 over its buffer limit), which is
// attributed to nothing.
func (st *stream) onResponseHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) (*extprocv3.ProcessingResponse, error) {
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
	code, served, hosts, source := 0, "", 0, servedFromNone
	for _, kv := range h.GetHeaders().GetHeaders() {
		switch kv.GetKey() {
		case ":status":
			code, _ = strconv.Atoi(headerValue(kv))
		case upstreamHostHeader:
			served, hosts = headerValue(kv), hosts+1
			if served != "" {
				source = servedFromHeader
			}
		}
	}
	if hosts > 1 {
		served, source = "", servedFromNone // not one value Envoy wrote over the upstream's: none believed
	}
	fromProxy := false
	if v, ok := servedMetadata(md); ok {
		// The proxy's own report. When it is there the header is not read
		// at all, even if the report is unusable: where a gateway reports
		// by metadata nothing overwrites the header, and a model server
		// could set it.
		served, fromProxy, source = v, true, servedFromMetadata
	}
	if st.owes == owesResponse {
		st.rec.servedReport(st.pool, source)
		st.responseStarted(code, served, fromProxy)
	}
	m := &extprocv3.HeaderMutation{RemoveHeaders: []string{upstreamHostHeader}}
	if st.s.cfg.Routing.DebugHeaders && st.tk != nil {
		dec := st.tk.Decision()
		m.SetHeaders = []*corev3.HeaderValueOption{
			header("x-dualmap-instance", dec.Instance),
			header("x-dualmap-reason", dec.Reason.String()),
			header("x-dualmap-cached-tokens", strconv.Itoa(dec.CachedTokens)),
		}
		m.SetHeaders = append(m.SetHeaders, st.routeDebugHeaders()...)
		m.SetHeaders = append(m.SetHeaders, st.pdDebugHeaders()...)
	}
	return continueResponseHeaders(m), nil
}

// responseStarted hands the upstream's status and the served endpoint
// (fromProxy: Envoy's metadata, else the header) to the ticket (health
// attribution, the proxy's fallback) and decides what the stream still
// owes it.
func (st *stream) responseStarted(code int, served string, fromProxy bool) {
	served = st.tk.Responded(code, served, fromProxy)
	st.rec.responded(st.pool, st.tk, code, served)
	ok := code >= 200 && code < 300
	if ok {
		st.usage.start(served)
	}
	switch {
	case ok && st.responseBodyComes() && st.streaming:
		st.owes = owesFirstChunk // first token and end come with the body
	case ok && st.responseBodyComes():
		st.owes = owesBodyEnd // the end comes with the body
	case ok && st.streaming:
		st.settle(false) // headers are the best first-token signal we get
		st.owes = owesStreamEnd
	default:
		st.settle(true)
	}
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
	if st.duplexResponse {
		return st.echoResponse(b.GetBody(), b.GetEndOfStream()), nil
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

// settle reports the request's progress on its ticket: its prefill is
// done (FirstToken; it feeds the TTFT estimator), or it is over (Done,
// which releases its load; the stream then owes nothing).
func (st *stream) settle(done bool) {
	if done {
		st.tk.Done()
		st.owes = owesNothing
	} else {
		st.tk.FirstToken()
		st.rec.firstToken(st.pool, st.tk)
	}
}

// finish runs when the stream ends: the response is over, the client left,
// or a message was refused. It releases whatever the request still holds
// in its pool (only a dispatched request is ever held: its ticket's Done).
func (st *stream) finish() {
	st.echo = echo{}
	st.dropBody()
	st.usageEnded()
	if st.owes != owesNothing {
		st.settle(true)
	}
	st.rec.ended()
}

// dropBody lets go of the request body and gives its bytes back to the
// server's budget.
func (st *stream) dropBody() {
	st.body = nil
	st.s.bounds.release(st.client, st.held)
	st.held = 0
}

// fail answers with the error and counts it. The stream accepts nothing
// more, and keeps no body.
func (st *stream) fail(err error) *extprocv3.ProcessingResponse {
	st.phase = phaseFailed
	st.dropBody()
	return immediate(st.rec.failed(err, st.path))
}

// failWith is fail for an error the recorder already classified as e.
func (st *stream) failWith(e httpError, err error) *extprocv3.ProcessingResponse {
	st.phase = phaseFailed
	st.dropBody()
	st.rec.failedAs(e, err, st.path)
	return immediate(e)
}

var _ pool.Observer = (*observer)(nil)
