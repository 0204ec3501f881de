package extproc

import (
	"fmt"

	"google.golang.org/grpc/codes"
)

// phase is where a stream is in the exchange of its HTTP request. Envoy
// sends one request's messages in this order (processing_mode: request
// headers SEND, request body BUFFERED or FULL_DUPLEX_STREAMED, response
// headers SEND, response body NONE, STREAMED or FULL_DUPLEX_STREAMED,
// trailers SKIP or SEND):
//
//	requestHeaders --request_headers------------------> requestBody
//	requestHeaders --request_headers, end of stream---> dispatched  (no body: pinned by routeAny)
//	requestBody    --request_body---------------------> requestBody (a chunk)
//	requestBody    --request_body, end of stream------> dispatched  (routed, or pinned by routeAny)
//	requestBody    --request_body, BUFFERED mode------> dispatched  (without end of stream: trailers ended it; routed)
//	requestBody    --request_trailers-----------------> dispatched  (full duplex: routed as at the end of stream)
//	requestBody    --request_trailers-----------------> failed      (STREAMED or not announced: 400, no pin possible)
//	dispatched     --request_trailers-----------------> dispatched  (after a BUFFERED body without end of stream)
//	requestBody    --response_headers-----------------> response    (Envoy answered itself, e.g. 413)
//	dispatched     --response_headers-----------------> response
//	response       --response_body--------------------> response    (a chunk)
//	response       --response_body, end of stream-----> done
//	response       --response_trailers----------------> done
//	(response headers with end of stream go to done at once)
//	any phase      --an immediate response is sent----> failed
//	any phase      --any other message----------------> failed: refused (protocolError)
//
// The phases are the same in both body modes (duplex.go); what differs is
// when a message is answered. In full duplex the request headers and body
// chunks get no answer until the body has ended; then the headers answer
// (the pin) goes out, followed by the body in chunks and, when trailers
// ended it, the trailers answer. Response chunks are echoed back.
//
// A refused message changes nothing (no routing, load, health or metric but
// the protocol_violation error count); Process ends the stream with the
// refusal's gRPC code and releases what the stream held. No message is
// accepted in done or failed: Envoy closes the stream after them.
type phase uint8

const (
	phaseRequestHeaders phase = iota // nothing seen: the request headers come first
	phaseRequestBody                 // headers seen, the body is coming
	phaseDispatched                  // the request went upstream; its response has not started
	phaseResponse                    // response headers seen; body chunks or trailers may follow
	phaseDone                        // the response is over
	phaseFailed                      // an immediate response was sent, or a message was refused
)

var phaseNames = [...]string{"request_headers", "request_body", "dispatched", "response", "done", "failed"}

func (p phase) String() string { return phaseNames[p] }

// message is the kind of a ProcessingRequest.
type message uint8

const (
	msgUnknown message = iota // none set, or one this version does not know
	msgRequestHeaders
	msgRequestBody
	msgRequestTrailers
	msgResponseHeaders
	msgResponseBody
	msgResponseTrailers
)

var messageNames = [...]string{"unknown", "request_headers", "request_body", "request_trailers",
	"response_headers", "response_body", "response_trailers"}

func (m message) String() string { return messageNames[m] }

// protocolError is a message a stream refused: one of a kind it cannot
// answer, or one its phase does not accept.
type protocolError struct {
	msg   message
	phase phase // the phase that refused it
}

func (e *protocolError) Error() string {
	if e.msg == msgUnknown {
		return fmt.Sprintf("extproc: unknown message kind in phase %s", e.phase)
	}
	return fmt.Sprintf("extproc: %s message out of phase %s", e.msg, e.phase)
}

// code is the gRPC status the stream ends with: InvalidArgument for a
// message the router cannot read, FailedPrecondition for one that is well
// formed but out of phase.
func (e *protocolError) code() codes.Code {
	if e.msg == msgUnknown {
		return codes.InvalidArgument
	}
	return codes.FailedPrecondition
}
