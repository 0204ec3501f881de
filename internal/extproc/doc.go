// Package extproc is the Envoy external-processing (ext_proc) protocol: it
// receives each HTTP request's headers and body over a gRPC stream
// (buffered, or full-duplex streamed as Gateway API Inference Extension
// gateways send it: duplex.go; the gateways' metadata and request
// controls: gateway.go, routesettings.go), decides the request's controls
// from its headers and route settings, collects and parses the OpenAI-style
// body, routes it with one call into its pool (package pool) and answers
// with a header (and envoy.lb dynamic metadata) that pins the upstream
// endpoint. It turns every failure into an OpenAI-style error response and
// reports the response (status, the endpoint that served, first token,
// end) on the pool's ticket.
//
// One stream is one HTTP request; a stream's processor has one method per
// ext_proc message kind (stream.go), each accepted only in the phases of the
// request's exchange it belongs to (phase.go): a message out of phase ends
// the stream with a gRPC error and changes nothing. Errors become Envoy
// immediate responses in one place (respond.go); a request's metrics and
// trace are its recorder's (record.go). The package holds no pool state:
// tokenizers, schedulers, health, membership and engine signals are package
// pool's, and the scheduler is the decision maker.
package extproc
