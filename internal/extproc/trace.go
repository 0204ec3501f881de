package extproc

import (
	"context"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/telemetry"
	"github.com/dualmap/dualmap/scheduler"
)

// Tracing: one span, dualmap.route, per ext_proc stream (one HTTP request),
// from its request headers to the stream's end, child of the trace context
// the client's headers carry (W3C traceparent, tracestate, baggage). Its
// names and attributes are listed in README "Tracing". The stream calls the
// hooks below at its phase boundaries; every hook returns at once when the
// server has no tracer (st.tr is nil), so tracing off costs a nil check.
// Prompt text never goes into a span.

// Span names.
const (
	spanRoute      = "dualmap.route"
	eventTokenized = "dualmap.tokenized"
	spanQueue      = "dualmap.queue_wait"
)

// reqTrace is one request's tracing state.
type reqTrace struct {
	ctx     context.Context // carries span
	span    trace.Span
	explain scheduler.Explain
	model   string // from the body, for gen_ai.request.model
	// attrs are the route span's attributes, set at its end in one call
	// (one slice, no growth or de-duplication rounds on the way).
	attrs []attribute.KeyValue
}

// set records attributes of the route span (a later value of a key wins).
func (t *reqTrace) set(kv ...attribute.KeyValue) { t.attrs = append(t.attrs, kv...) }

// traceHeaders are the request headers the propagator reads.
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// headerCarrier adapts ext_proc request headers (reading) and a header
// mutation (writing) to the propagator.
type headerCarrier struct {
	in  *corev3.HeaderMap
	out *extprocv3.HeaderMutation
}

func (c headerCarrier) Get(key string) string {
	for _, kv := range c.in.GetHeaders() {
		if strings.EqualFold(kv.GetKey(), key) {
			return headerValue(kv)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	c.out.SetHeaders = append(c.out.SetHeaders, header(key, value))
}

func (c headerCarrier) Keys() []string { return traceHeaders[:] }

// traceStart starts the request's span from its headers.
func (st *stream) traceStart(h *extprocv3.HttpHeaders) {
	if st.s.tracer == nil {
		return
	}
	parent := telemetry.Propagator.Extract(st.ctx, headerCarrier{in: h.GetHeaders()})
	path, _, _ := strings.Cut(st.path, "?") // never the query
	ctx, span := st.s.tracer.Start(parent, spanRoute, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", st.method), attribute.String("url.path", path)))
	st.tr = &reqTrace{ctx: ctx, span: span, attrs: make([]attribute.KeyValue, 0, 40)}
}

// traceTokenized records the parse and tokenize step that started at start
// and, when r is routed next, asks the scheduler to explain its decision.
func (st *stream) traceTokenized(start time.Time, r *scheduler.Request, err error) {
	if st.tr == nil {
		return
	}
	end := time.Now()
	ev := []trace.EventOption{trace.WithTimestamp(end)}
	if err != nil {
		ev = append(ev, trace.WithAttributes(attribute.Bool("error", true)))
	}
	st.tr.span.AddEvent(eventTokenized, ev...)
	attrs := st.tr.attrs
	attrs = append(attrs, attribute.Float64("dualmap.tokenize_s", end.Sub(start).Seconds()))
	switch st.kind {
	case openai.KindChat:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "chat"))
	case openai.KindCompletion:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "text_completion"))
	case openai.KindResponses:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "responses"))
	}
	if st.tr.model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", st.tr.model))
	}
	if r != nil {
		r.Explain = &st.tr.explain
		p := st.pool
		slo := r.SLO
		if slo == 0 {
			slo = st.s.cfg.SLO.Default
		}
		attrs = append(attrs, attribute.Int("gen_ai.usage.input_tokens", r.Tokens),
			attribute.String("dualmap.pool", p.Name()), attribute.String("dualmap.policy", p.Policy()),
			attribute.Float64("dualmap.slo_s", slo.Seconds()), attribute.Bool("dualmap.session", r.Session != 0))
	}
	st.tr.attrs = attrs
}

// traceModel notes the request's model (from its body).
func (st *stream) traceModel(model string) {
	if st.tr != nil {
		st.tr.model = model
	}
}

// outcome is the dualmap.reason of a dispatched request: what decided
// where it went, in the terms operators ask about.
func outcome(dec scheduler.Decision) string {
	switch {
	case dec.Reason == scheduler.ReasonMigrated:
		return "migrated"
	case dec.Waited > 0:
		return "queued"
	}
	switch dec.Reason {
	case scheduler.ReasonCache:
		return "cache"
	case scheduler.ReasonLoad:
		return "slo_switch"
	case scheduler.ReasonTie:
		return "tie_load"
	}
	return dec.Reason.String() // overflow, only, policy, rerouted
}

// traceDecided records the pool's answer to a request handed to its
// scheduler at st.decideAt: the decision with its candidates, the wait in
// the router queue, or the shedding (a failed tokenization was traced by
// traceTokenized).
func (st *stream) traceDecided(r *scheduler.Request, dec scheduler.Decision, err error) {
	if st.tr == nil {
		return
	}
	start := st.decideAt
	sp := st.tr.span
	if err != nil {
		e := classify(err, time.Second)
		sp.AddEvent("dualmap.shed", trace.WithAttributes(attribute.String("dualmap.shed.kind", e.kind), attribute.Int("http.response.status_code", e.status)))
		st.tr.set(attribute.String("dualmap.reason", "shed"), attribute.Float64("dualmap.queue_wait_s", time.Since(start).Seconds()))
		return
	}
	r.Explain = nil // the scheduler keeps the request; the explanation is ours
	if dec.Waited > 0 {
		_, q := st.s.tracer.Start(st.tr.ctx, spanQueue, trace.WithTimestamp(start))
		q.End(trace.WithTimestamp(start.Add(dec.Waited)))
	}
	if dec.Reason == scheduler.ReasonMigrated {
		sp.AddEvent("dualmap.migrated", trace.WithAttributes(attribute.String("dualmap.instance", dec.Instance)))
	}
	// The candidates' figures as comma-separated lists in ring order: one
	// buffer, no reflection (slice attributes cost several allocations each).
	e := &st.tr.explain
	var buf [512]byte
	ids, cached, pending, ttft := buf[:0], make([]byte, 0, 64), make([]byte, 0, 64), make([]byte, 0, 64)
	for i := range min(e.N, len(e.Candidates)) {
		if i > 0 {
			ids, cached, pending, ttft = append(ids, ','), append(cached, ','), append(pending, ','), append(ttft, ',')
		}
		c := &e.Candidates[i]
		ids = append(ids, c.ID...)
		cached = strconv.AppendInt(cached, int64(c.CachedTokens), 10)
		pending = strconv.AppendInt(pending, int64(c.PendingTokens), 10)
		ttft = strconv.AppendFloat(ttft, c.EstimatedTTFT.Seconds(), 'f', 4, 64)
	}
	st.tr.set(
		attribute.String("dualmap.instance", dec.Instance),
		attribute.String("dualmap.fallback", dec.Fallback),
		attribute.String("dualmap.reason", outcome(dec)),
		attribute.String("dualmap.choice", dec.Reason.String()),
		attribute.Int("dualmap.key_depth", dec.KeyDepth),
		attribute.Int("dualmap.predicted_cached_tokens", dec.CachedTokens),
		attribute.Float64("dualmap.estimated_ttft_s", dec.EstimatedTTFT.Seconds()),
		attribute.Float64("dualmap.queue_wait_s", dec.Waited.Seconds()),
		attribute.String("dualmap.candidates", string(ids)),
		attribute.String("dualmap.candidates.cached_tokens", string(cached)),
		attribute.String("dualmap.candidates.pending_tokens", string(pending)),
		attribute.String("dualmap.candidates.estimated_ttft_s", string(ttft)),
	)
}

// traceInject adds the request's trace context, with the route span as
// parent, to the upstream request's header mutation.
func (st *stream) traceInject(m *extprocv3.HeaderMutation) {
	if st.tr == nil {
		return
	}
	telemetry.Propagator.Inject(st.tr.ctx, headerCarrier{out: m})
}

// traceResponse records the response's start: its status and the endpoint
// that served it (pinned: the one the request was pinned to).
func (st *stream) traceResponse(code int, served, pinned string) {
	if st.tr == nil {
		return
	}
	st.tr.set(attribute.Int("http.response.status_code", code), attribute.String("dualmap.served_instance", served))
	if served != pinned {
		st.tr.set(attribute.String("dualmap.reason", "fallback"))
	}
	if code >= 500 {
		st.tr.span.SetStatus(codes.Error, "upstream status "+strconv.Itoa(code))
	}
}

// traceFirstToken records the observed time to first token (from dispatch).
func (st *stream) traceFirstToken(dispatched time.Time) {
	if st.tr == nil {
		return
	}
	d := time.Since(dispatched)
	st.tr.span.AddEvent("dualmap.first_token")
	st.tr.set(attribute.Float64("dualmap.first_token_s", d.Seconds()))
}

// traceFailed records the router's own error answer.
func (st *stream) traceFailed(e httpError) {
	if st.tr == nil {
		return
	}
	st.tr.set(attribute.Int("http.response.status_code", e.status), attribute.String("error.type", e.kind))
	st.tr.span.SetStatus(codes.Error, e.kind)
}

// traceEnd ends the request's span (the stream is over).
func (st *stream) traceEnd() {
	if st.tr == nil {
		return
	}
	st.tr.span.SetAttributes(st.tr.attrs...)
	st.tr.span.End()
	st.tr = nil
}
