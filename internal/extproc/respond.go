package extproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/scheduler"
)

// Errors of the router itself (the body parser has its own, openai.Error).
var (
	errModelNotFound = errors.New("extproc: no pool serves this model")
	errBadSLO        = errors.New("extproc: bad SLO header")
	errTokenize      = errors.New("extproc: tokenization failed")
)

// Errors of the bounds on the router's memory (limits.max_streams,
// limits.max_buffered_bytes); a body over limits.max_body_bytes is
// bodyTooLarge's openai.Error.
var (
	errTooManyStreams = errors.New("extproc: too many streams")
	errBufferFull     = errors.New("extproc: request body buffer full")
)

// errTrailersUnrouted is the 400 of a request whose body ended with
// trailers where the router cannot pin it any more (request body mode
// STREAMED, or Envoy did not say).
var errTrailersUnrouted = errors.New("extproc: request trailers ended a streamed body that can no longer be routed")

// Error kinds of the bounds, as counted in dualmap_errors_total.
const (
	kindTooLarge       = "too_large"
	kindTooManyStreams = "too_many_streams"
	kindBufferFull     = "buffer_full"
)

// bodyTooLarge is the 413 of a body that grew past limit, on any path: the
// error the body parser returns for an inference body over the limit.
func bodyTooLarge(limit int) error {
	return &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: openai.TypeInvalidRequest, Code: openai.CodeRequestTooLarge,
		Message: fmt.Sprintf("The request body is more than the limit of %d bytes.", limit)}
}

// httpError is what a client gets: status, OpenAI-style body, error kind
// for metrics, and an optional Retry-After.
type httpError struct {
	status     int
	kind       string
	body       []byte
	retryAfter time.Duration
}

// classify is the one place that turns an error into an HTTP answer.
func classify(err error, retryAfter time.Duration) httpError {
	if oe, ok := openai.AsError(err); ok {
		kind := "bad_request"
		switch oe.Status {
		case 413:
			kind = kindTooLarge
		case 415:
			kind = "unsupported_media_type"
		}
		return httpError{status: oe.Status, kind: kind, body: oe.JSON()}
	}
	switch {
	case errors.Is(err, errModelNotFound):
		return httpError{status: 404, kind: "model_not_found", body: errorJSON(err.Error(), "invalid_request_error", "model", "model_not_found")}
	case errors.Is(err, errBadSLO):
		return httpError{status: 400, kind: "bad_request", body: errorJSON(err.Error(), "invalid_request_error", "", "bad_slo")}
	case errors.Is(err, errSubset):
		return httpError{status: 503, kind: "subset", retryAfter: retryAfter,
			body: errorJSON(err.Error(), "service_unavailable", "", "no_endpoint_in_subset")}
	case errors.Is(err, scheduler.ErrShed):
		return httpError{status: 429, kind: "shed", retryAfter: retryAfter,
			body: errorJSON("the model servers are saturated and the request's objective is sheddable; retry later", "rate_limit_exceeded", "", "shed")}
	case errors.Is(err, scheduler.ErrNoEndpoint):
		return httpError{status: 503, kind: "no_endpoint", retryAfter: retryAfter,
			body: errorJSON("no healthy model server is available", "service_unavailable", "", "no_healthy_upstream")}
	case errors.Is(err, scheduler.ErrQueueTimeout):
		return httpError{status: 429, kind: "queue_timeout", retryAfter: retryAfter,
			body: errorJSON("the model servers are saturated; retry later", "rate_limit_exceeded", "", "queue_timeout")}
	case errors.Is(err, scheduler.ErrLate):
		return httpError{status: 503, kind: "late", retryAfter: retryAfter,
			body: errorJSON("the request can no longer meet its time-to-first-token objective here; retry later", "service_unavailable", "", "slo_unreachable")}
	case errors.Is(err, errTooManyStreams):
		return httpError{status: 429, kind: kindTooManyStreams, retryAfter: retryAfter,
			body: errorJSON("the router is serving too many requests; retry later", "rate_limit_exceeded", "", "too_many_streams")}
	case errors.Is(err, errBufferFull):
		return httpError{status: 429, kind: kindBufferFull, retryAfter: retryAfter,
			body: errorJSON("the router is holding too many request bodies; retry later", "rate_limit_exceeded", "", "buffer_full")}
	case errors.Is(err, errTrailersUnrouted):
		return httpError{status: 400, kind: "bad_request",
			body: errorJSON("request trailers are not supported on this route; send the body without trailers", "invalid_request_error", "", "trailers_unsupported")}
	case errors.Is(err, errBodyTimeout):
		return httpError{status: http.StatusRequestTimeout, kind: kindBodyTimeout,
			body: errorJSON("the request body did not arrive in time", "invalid_request_error", "", "request_timeout")}
	case errors.Is(err, errRouteSetting):
		return httpError{status: 503, kind: "route_setting",
			body: errorJSON("the route is misconfigured; see the router's log", "service_unavailable", "", "route_misconfigured")}
	case errors.Is(err, errBadPriority):
		return httpError{status: 400, kind: "bad_request", body: errorJSON(err.Error(), "invalid_request_error", "", "bad_priority")}
	case errors.Is(err, errTokenize):
		return httpError{status: 400, kind: "tokenize", body: errorJSON(err.Error(), "invalid_request_error", "", "tokenize")}
	}
	return httpError{status: 500, kind: "internal", body: errorJSON("internal router error", "server_error", "", "internal")}
}

func errorJSON(msg, typ, param, code string) []byte {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	b, _ := json.Marshal(map[string]body{"error": {Message: msg, Type: typ, Param: opt(param), Code: opt(code)}})
	return b
}

// immediate answers the client directly; Envoy does not forward the request.
func immediate(e httpError) *extprocv3.ProcessingResponse {
	headers := []*corev3.HeaderValueOption{
		header("content-type", "application/json"),
	}
	if e.retryAfter > 0 {
		headers = append(headers, header("retry-after", strconv.Itoa(max(1, int(e.retryAfter.Round(time.Second)/time.Second)))))
	}
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		headers = append(headers, header(droppedHeader, e.kind)) // why it was shed
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: headers},
			Body:    e.body,
			Details: "dualmap_" + e.kind,
		},
	}}
}

// header sets (overwriting) one header. Only RawValue is set: Envoy
// ignores Value when RawValue is present and rejects both.
func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

func continueHeaders(m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: m}},
	}}
}

func continueBody(m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{HeaderMutation: m}},
	}}
}

func continueResponseHeaders(m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: m}},
	}}
}

// lbMetadata is the envoy.lb dynamic metadata the override_host policy reads.
func lbMetadata(key, value string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"envoy.lb": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			key: structpb.NewStringValue(value),
		}}),
	}}
}
