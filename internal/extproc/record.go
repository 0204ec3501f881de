package extproc

import (
	"context"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/pool"
	"github.com/dualmap/dualmap/scheduler"
)

// recorder is one request's metrics and trace hooks. The stream tells it
// what happened, once per event, in the protocol's terms; it counts,
// observes and traces each event here, so that the stream's methods carry
// no metric or span of their own. Every error is classified once (failed,
// shed), and that classification is what the answer, the counters and the
// span all report. It is part of the stream and runs on its goroutine.
type recorder struct {
	s  *Server
	tr *reqTrace // nil when tracing is off (trace.go)
}

// started is told of the request's headers: its span starts.
func (rc *recorder) started(ctx context.Context, h *extprocv3.HttpHeaders, method, path string) {
	rc.traceStart(ctx, h, method, path)
}

// refused counts a message the stream refused in phase ph.
func (rc *recorder) refused(ph phase) {
	rc.s.m.streamErrors.WithLabelValues(ph.String()).Inc()
}

// rejected counts a request refused by one of the bounds on the router's
// memory (limit: its configuration key).
func (rc *recorder) rejected(limit string) {
	rc.s.m.rejections.WithLabelValues(limit).Inc()
}

// failed classifies the router's error answer err, counts it and traces
// it, and returns what the client gets.
func (rc *recorder) failed(err error, path string) httpError {
	e := classify(err, time.Second)
	rc.failedAs(e, err, path)
	return e
}

// failedAs counts and traces an error answer already classified as e.
func (rc *recorder) failedAs(e httpError, err error, path string) {
	rc.s.m.errors.WithLabelValues(e.kind).Inc()
	rc.traceFailed(e)
	rc.s.log.Debug("request rejected", "kind", e.kind, "status", e.status, "path", path, "error", err)
}

// pinned counts a request that carries no prompt, pinned by p to any
// ready instance.
func (rc *recorder) pinned(p *pool.Pool) {
	rc.s.m.decisions.WithLabelValues(p.Name(), p.Policy(), "any").Inc()
}

// model notes the request's model, from its body.
func (rc *recorder) model(m string) { rc.traceModel(m) }

// tokenized ends the parse and tokenize step that began at start: r is the
// request about to be routed by p, or nil with the error.
func (rc *recorder) tokenized(start time.Time, kind openai.Kind, p *pool.Pool, r *scheduler.Request, err error) {
	rc.s.m.tokenize.Observe(time.Since(start).Seconds())
	rc.traceTokenized(start, kind, p, r, err)
}

// shed classifies an error of p's scheduler for a request handed to it at
// start (shedding, or the client gone while it waited), counts it as
// shedding and traces it, and returns what the client gets.
func (rc *recorder) shed(p *pool.Pool, start time.Time, err error) httpError {
	e := classify(err, time.Second)
	rc.s.m.shed.WithLabelValues(p.Name(), strconv.Itoa(e.status), e.kind).Inc()
	rc.traceDecided(start, nil, scheduler.Decision{}, &e)
	return e
}

// decided records a request p dispatched (handed to its scheduler at
// start): the decision, the wait, the prompt's tokens and the cache
// reuse predicted.
func (rc *recorder) decided(p *pool.Pool, start time.Time, tk *pool.Ticket) {
	m, name := rc.s.m, p.Name()
	dec, r := tk.Decision(), tk.Request()
	rc.traceDecided(start, r, dec, nil)
	rc.tracePD(tk)
	if dec.Waited > 0 {
		m.queueWait.WithLabelValues(name).Observe(dec.Waited.Seconds())
	}
	m.decide.Observe((time.Since(start) - dec.Waited).Seconds())
	m.decisions.WithLabelValues(name, p.Policy(), dec.Reason.String()).Inc()
	m.promptTok.WithLabelValues(name).Add(float64(r.Tokens))
	m.cachedTok.WithLabelValues(name).Add(float64(dec.CachedTokens))
	m.ttftEstimated.WithLabelValues(name, dec.Instance).Observe(dec.EstimatedTTFT.Seconds())
}

// inject adds the request's trace context to the upstream request's
// headers.
func (rc *recorder) inject(hm *extprocv3.HeaderMutation) { rc.traceInject(hm) }

// responded records the response's start for the ticket: the time from
// dispatch to the response headers, the status and who served.
func (rc *recorder) responded(p *pool.Pool, tk *pool.Ticket, code int, served string) {
	rc.s.m.firstByte.WithLabelValues(p.Name()).Observe(time.Since(tk.Dispatched()).Seconds())
	rc.traceResponse(code, served, tk.Decision().Instance)
}

// servedReport counts a response to a dispatched request by where the
// endpoint that served was learnt (servedFrom*).
func (rc *recorder) servedReport(p *pool.Pool, source string) {
	rc.s.m.servedReports.WithLabelValues(p.Name(), source).Inc()
}

// firstToken records the observed TTFT of the ticket's request, and
// whether it met its SLO.
func (rc *recorder) firstToken(p *pool.Pool, tk *pool.Ticket) {
	d := time.Since(tk.Dispatched())
	dec := tk.Decision()
	rc.s.m.ttftObserved.WithLabelValues(p.Name(), dec.Instance).Observe(d.Seconds())
	slo := tk.Request().SLO
	if slo == 0 {
		slo = rc.s.cfg.SLO.Default
	}
	rc.s.m.sloMet.WithLabelValues(p.Name(), strconv.FormatBool(d+dec.Waited <= slo)).Inc()
	rc.traceFirstToken(d)
}

// usage records the engine-reported cached prompt tokens of a response
// served by instance, against the prediction.
func (rc *recorder) usage(p *pool.Pool, instance string, predicted, reported int) {
	rc.s.m.usage.observe(p.Name(), instance, predicted, reported)
}

// ended ends the request's span.
func (rc *recorder) ended() { rc.traceEnd() }
