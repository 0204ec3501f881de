package extproc

import (
	"strconv"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Body modes. Envoy tells the server how its filter sends bodies in the
// first message of a stream (protocol_config, Envoy 1.34+); the stream
// follows it, so one router serves BUFFERED and FULL_DUPLEX_STREAMED
// filters side by side with no setting of its own. Without protocol_config
// the request body is taken as BUFFERED (or STREAMED: chunks, each
// answered) and routing.response_body says whether response bodies come.
//
// FULL_DUPLEX_STREAMED (what Gateway API Inference Extension gateways use)
// changes the exchange: Envoy sends the body chunks without waiting for
// answers, and the server answers each message kind in order with any
// number of chunks of its own. The request headers answer (the pin) waits
// until the body has ended, since routing needs the prompt; then the body
// goes back to Envoy unchanged, in StreamedBodyResponse chunks of at most
// maxEchoChunk bytes, the last one carrying end_of_stream. Until that
// headers answer is sent an immediate response (400, 413, 429, 503) may
// still replace the request. Response bodies are echoed chunk by chunk as
// they come.

// maxEchoChunk bounds one StreamedBodyResponse chunk: below Envoy's 64 KiB
// per-message limit on a streamed body response, as the reference endpoint
// picker does.
const maxEchoChunk = 62000

// protocol records the body modes Envoy announced in the stream's first
// message.
func (st *stream) protocol(pc *extprocv3.ProtocolConfiguration) {
	st.announced = true
	st.duplex = pc.GetRequestBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	st.duplexResponse = pc.GetResponseBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	st.responseBody = pc.GetResponseBodyMode() != filterv3.ProcessingMode_NONE
	mode := pc.GetRequestBodyMode()
	st.bufferedBody = mode == filterv3.ProcessingMode_BUFFERED || mode == filterv3.ProcessingMode_BUFFERED_PARTIAL
}

// responseBodyComes reports whether Envoy sends the response body to the
// router: as announced, or else as routing.response_body says.
func (st *stream) responseBodyComes() bool {
	if st.announced {
		return st.responseBody
	}
	return st.s.cfg.Routing.ResponseBody == "streamed"
}

// echo is what a full-duplex stream still sends after its answer to the
// last message: a body, in chunks of at most maxEchoChunk bytes, then
// (when request trailers ended the request body) the trailers answer. A
// request body echoed is the stream's own: its held bytes stay reserved in
// the server's bounds until the last chunk has gone.
type echo struct {
	active   bool   // something is left to send
	response bool   // body is a response chunk, not the request body
	body     []byte // what to send
	off      int    // of body, sent so far
	sent     bool   // a chunk was sent (an empty body still gets one)
	eos      bool   // the body ended with end_of_stream: the last chunk says so
	trailers bool   // a trailers answer follows the chunks
}

// next returns the next message the stream owes Envoy beyond its answer to
// the last one, or nil when it owes nothing more. The server sends them in
// order, after that answer, before reading on.
func (st *stream) next() *extprocv3.ProcessingResponse {
	e := &st.echo
	if !e.active {
		return nil
	}
	if e.off < len(e.body) || (!e.sent && (e.eos || e.response)) {
		end := min(e.off+maxEchoChunk, len(e.body))
		chunk := e.body[e.off:end]
		e.off, e.sent = end, true
		last := end == len(e.body) && e.eos
		if e.response {
			return streamedResponseBody(chunk, last)
		}
		return streamedRequestBody(chunk, last)
	}
	if e.trailers {
		e.trailers = false
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	}
	if !e.response {
		st.dropBody()
	}
	*e = echo{}
	return nil
}

// echoRequest arranges for the held request body to be sent back after the
// headers answer; eos says whether the body ended with end_of_stream (or
// else with request trailers, whose answer follows it).
func (st *stream) echoRequest(eos bool) {
	st.echo = echo{active: true, body: st.body, eos: eos, trailers: !eos}
}

// echoResponse answers a response body chunk by sending it back unchanged
// (split into several when it is larger than maxEchoChunk).
func (st *stream) echoResponse(b []byte, eos bool) *extprocv3.ProcessingResponse {
	st.echo = echo{active: true, response: true, body: b, eos: eos}
	return st.next()
}

// contentLength fixes the request's content-length when the body going
// upstream is not the one the client declared (the router does not change
// bodies today; a declared length that disagrees with the body Envoy
// delivered is replaced by the delivered one).
func (st *stream) contentLength(m *extprocv3.HeaderMutation) {
	if st.declared >= 0 && st.declared != len(st.body) {
		m.SetHeaders = append(m.SetHeaders, header("content-length", strconv.Itoa(len(st.body))))
	}
}

func streamedRequestBody(b []byte, eos bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: streamedMutation(b, eos)}},
	}}
}

func streamedResponseBody(b []byte, eos bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: streamedMutation(b, eos)}},
	}}
}

func streamedMutation(b []byte, eos bool) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: eos},
	}}
}
