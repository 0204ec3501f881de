package openai

import "strings"

// Kind is what an HTTP request is, as far as the router cares.
type Kind uint8

const (
	// KindOther is anything that is not a POST to an inference path: it is
	// routed without looking at the body.
	KindOther Kind = iota
	// KindChat is POST /v1/chat/completions.
	KindChat
	// KindCompletion is POST /v1/completions.
	KindCompletion
	// KindResponses is POST /v1/responses.
	KindResponses
)

// String returns the kind's lower-case name, for logs and metrics labels.
func (k Kind) String() string {
	switch k {
	case KindChat:
		return "chat"
	case KindCompletion:
		return "completion"
	case KindResponses:
		return "responses"
	default:
		return "other"
	}
}

// Classify tells the kind of a request from its method and path alone, so
// the caller can decide whether the body is worth buffering. Only the method
// "POST" counts (methods are case-sensitive). The path may carry a query
// string, which is ignored, and one trailing slash; otherwise it must be
// exactly /v1/chat/completions, /v1/completions or /v1/responses. Prefixed
// paths such as /openai/v1/chat/completions are KindOther.
func Classify(method, path string) Kind {
	if method != "POST" {
		return KindOther
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	switch path {
	case "/v1/chat/completions":
		return KindChat
	case "/v1/completions":
		return KindCompletion
	case "/v1/responses":
		return KindResponses
	default:
		return KindOther
	}
}
