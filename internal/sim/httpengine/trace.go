package httpengine

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/telemetry"
)

// SpanName is the name of the span the engine records per inference request.
const SpanName = "engine.inference"

// reqSpan is one inference request's span (nil span: tracing off).
type reqSpan struct{ span trace.Span }

// startSpan starts the request's span, a child of the trace context its
// headers carry (the router injects its decision span's). Never prompt text.
func (s *Server) startSpan(r *http.Request, req *openai.Request, tokens int) reqSpan {
	if s.opt.Tracer == nil {
		return reqSpan{}
	}
	ctx := telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	op := "text_completion"
	if req.Kind == openai.KindChat {
		op = "chat"
	}
	_, span := s.opt.Tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.request.model", req.Model),
		attribute.Int("gen_ai.usage.input_tokens", tokens),
		attribute.Bool("gen_ai.request.stream", req.Stream),
		attribute.String("server.address", s.opt.Name),
	))
	return reqSpan{span: span}
}

func (sp reqSpan) end() {
	if sp.span != nil {
		sp.span.End()
	}
}
