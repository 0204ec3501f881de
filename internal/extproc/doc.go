// Package extproc is the Envoy external-processing (ext_proc) server: it
// receives each HTTP request's headers and body over a gRPC stream (buffered,
// or full-duplex streamed as Gateway API Inference Extension gateways send
// it: duplex.go; the gateways' metadata and request controls: gateway.go),
// parses OpenAI-style bodies, tokenizes the prompt, asks the scheduler where
// the request goes, and answers with a header (and envoy.lb dynamic
// metadata) that pins the upstream endpoint. It holds requests that must
// wait in the router queue, turns every failure into an OpenAI-style error
// response, and feeds response timing and status back to the scheduler.
//
// One stream is one HTTP request; a stream's processor has one method per
// ext_proc message kind (stream.go), each accepted only in the phases of the
// request's exchange it belongs to (phase.go): a message out of phase ends
// the stream with a gRPC error and changes nothing. Errors become Envoy
// immediate responses in one place (respond.go). The package owns no shared state of its own beyond the
// pools it routes for; the scheduler is the decision maker.
package extproc
