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
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/internal/telemetry"
	"github.com/dualmap/dualmap/scheduler"
)

// Tracing: one span, dualmap.route, per ext_proc stream (one HTTP request),
// from its request headers to the stream's end, child of the trace context
// the client's headers carry (W3C traceparent, tracestate, baggage). Its
// names and attributes are listed in README "Tracing". The request's
// recorder (record.go) calls the hooks below; every hook returns at once
// when the server has no tracer (rc.tr is nil), so tracing off costs a nil
// check. Prompt text never goes into a span.

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
func (rc *recorder) traceStart(ctx context.Context, h *extprocv3.HttpHeaders, method, path string) {
	if rc.s.tracer == nil {
		return
	}
	parent := telemetry.Propagator.Extract(ctx, headerCarrier{in: h.GetHeaders()})
	path, _, _ = strings.Cut(path, "?") // never the query
	ctx, span := rc.s.tracer.Start(parent, spanRoute, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path)))
	rc.tr = &reqTrace{ctx: ctx, span: span, attrs: make([]attribute.KeyValue, 0, 40)}
}

// traceTokenized records the parse and tokenize step that started at start
// and, when r is routed next, asks the scheduler to explain its decision.
func (rc *recorder) traceTokenized(start time.Time, kind openai.Kind, p *pool.Pool, r *scheduler.Request, err error) {
	if rc.tr == nil {
		return
	}
	end := time.Now()
	ev := []trace.EventOption{trace.WithTimestamp(end)}
	if err != nil {
		ev = append(ev, trace.WithAttributes(attribute.Bool("error", true)))
	}
	rc.tr.span.AddEvent(eventTokenized, ev...)
	attrs := rc.tr.attrs
	attrs = append(attrs, attribute.Float64("dualmap.tokenize_s", end.Sub(start).Seconds()))
	switch kind {
	case openai.KindChat:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "chat"))
	case openai.KindCompletion:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "text_completion"))
	case openai.KindResponses:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "responses"))
	}
	if rc.tr.model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", rc.tr.model))
	}
	if r != nil {
		r.Explain = &rc.tr.explain
		slo := r.SLO
		if slo == 0 {
			slo = rc.s.cfg.SLO.Default
		}
		attrs = append(attrs, attribute.Int("gen_ai.usage.input_tokens", r.Tokens),
			attribute.String("dualmap.pool", p.Name()), attribute.String("dualmap.policy", p.Policy()),
			attribute.Float64("dualmap.slo_s", slo.Seconds()), attribute.Bool("dualmap.session", r.Session != 0))
	}
	rc.tr.attrs = attrs
}

// traceModel notes the request's model (from its body).
func (rc *recorder) traceModel(model string) {
	if rc.tr != nil {
		rc.tr.model = model
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
	return dec.Reason.String() // overflow, holder, slot, only, policy, rerouted
}

// traceDecided records the pool's answer to a request handed to its
// scheduler at start: the decision with its candidates, the wait in the
// router queue, or the shedding e (a failed tokenization was traced by
// traceTokenized).
func (rc *recorder) traceDecided(start time.Time, r *scheduler.Request, dec scheduler.Decision, e *httpError) {
	if rc.tr == nil {
		return
	}
	sp := rc.tr.span
	if e != nil {
		sp.AddEvent("dualmap.shed", trace.WithAttributes(attribute.String("dualmap.shed.kind", e.kind), attribute.Int("http.response.status_code", e.status)))
		rc.tr.set(attribute.String("dualmap.reason", "shed"), attribute.Float64("dualmap.queue_wait_s", time.Since(start).Seconds()))
		return
	}
	r.Explain = nil // the scheduler keeps the request; the explanation is ours
	if dec.Waited > 0 {
		_, q := rc.s.tracer.Start(rc.tr.ctx, spanQueue, trace.WithTimestamp(start))
		q.End(trace.WithTimestamp(start.Add(dec.Waited)))
	}
	if dec.Reason == scheduler.ReasonMigrated {
		sp.AddEvent("dualmap.migrated", trace.WithAttributes(attribute.String("dualmap.instance", dec.Instance)))
	}
	// The candidates' figures as comma-separated lists in ring order, all
	// five written into one buffer and turned into one string that the
	// attributes share (no reflection, one allocation: slice attributes
	// cost several each).
	e2 := &rc.tr.explain
	var buf [1024]byte
	b := buf[:0]
	n := min(e2.N, len(e2.Candidates))
	var ends [5]int
	for list := range 5 {
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			c := &e2.Candidates[i]
			switch list {
			case 0:
				b = append(b, c.ID...)
			case 1:
				b = strconv.AppendInt(b, int64(c.CachedTokens), 10)
			case 2:
				b = strconv.AppendInt(b, int64(c.PendingTokens), 10)
			case 3:
				b = strconv.AppendFloat(b, c.EstimatedTTFT.Seconds(), 'f', 4, 64)
			case 4:
				b = strconv.AppendFloat(b, c.BusyExtra.Seconds(), 'f', 4, 64)
			}
		}
		ends[list] = len(b)
	}
	all := string(b)
	rc.tr.set(
		attribute.String("dualmap.instance", dec.Instance),
		attribute.String("dualmap.fallback", dec.Fallback),
		attribute.String("dualmap.reason", outcome(dec)),
		attribute.String("dualmap.choice", dec.Reason.String()),
		attribute.Int("dualmap.key_depth", dec.KeyDepth),
		attribute.Int("dualmap.predicted_cached_tokens", dec.CachedTokens),
		attribute.Float64("dualmap.estimated_ttft_s", dec.EstimatedTTFT.Seconds()),
		attribute.Float64("dualmap.queue_wait_s", dec.Waited.Seconds()),
		attribute.String("dualmap.candidates", all[:ends[0]]),
		attribute.String("dualmap.candidates.cached_tokens", all[ends[0]:ends[1]]),
		attribute.String("dualmap.candidates.pending_tokens", all[ends[1]:ends[2]]),
		attribute.String("dualmap.candidates.estimated_ttft_s", all[ends[2]:ends[3]]),
		attribute.String("dualmap.candidates.busy_extra_s", all[ends[3]:ends[4]]),
	)
}

// traceInject adds the request's trace context, with the route span as
// parent, to the upstream request's header mutation.
func (rc *recorder) traceInject(m *extprocv3.HeaderMutation) {
	if rc.tr == nil {
		return
	}
	telemetry.Propagator.Inject(rc.tr.ctx, headerCarrier{out: m})
}

// traceResponse records the response's start: its status and the endpoint
// that served it (pinned: the one the request was pinned to).
func (rc *recorder) traceResponse(code int, served, pinned string) {
	if rc.tr == nil {
		return
	}
	rc.tr.set(attribute.Int("http.response.status_code", code), attribute.String("dualmap.served_instance", served))
	if served != pinned {
		rc.tr.set(attribute.String("dualmap.reason", "fallback"))
	}
	if code >= 500 {
		rc.tr.span.SetStatus(codes.Error, "upstream status "+strconv.Itoa(code))
	}
}

// traceFirstToken records the observed time to first token (from dispatch).
func (rc *recorder) traceFirstToken(d time.Duration) {
	if rc.tr == nil {
		return
	}
	rc.tr.span.AddEvent("dualmap.first_token")
	rc.tr.set(attribute.Float64("dualmap.first_token_s", d.Seconds()))
}

// traceFailed records the router's own error answer.
func (rc *recorder) traceFailed(e httpError) {
	if rc.tr == nil {
		return
	}
	rc.tr.set(attribute.Int("http.response.status_code", e.status), attribute.String("error.type", e.kind))
	rc.tr.span.SetStatus(codes.Error, e.kind)
}

// traceEnd ends the request's span (the stream is over).
func (rc *recorder) traceEnd() {
	if rc.tr == nil {
		return
	}
	rc.tr.span.SetAttributes(rc.tr.attrs...)
	rc.tr.span.End()
	rc.tr = nil
}
