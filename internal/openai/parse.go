package openai

import (
	"math"
	"unicode/utf8"
)

// maxBodyBytes is the largest body Parse reads whatever the Limits: the
// reader's canonical-JSON tree keeps offsets in int32.
const maxBodyBytes = math.MaxInt32

// Parse classifies a request and, for an inference request, parses its body.
//
// Only POST to /v1/chat/completions, /v1/completions or /v1/responses is
// parsed (see Classify: a query string and one trailing slash are allowed,
// prefixes are not). Anything else returns a Request with Kind KindOther and
// no error, without looking at contentType or body.
//
// For an inference request the checks run in this order, and the first
// failure is returned as an *Error:
//   - contentType must be JSON (see isJSONMediaType), else 415;
//   - body must be at most lim.MaxBodyBytes long when that is set, and under
//     2 GiB in any case, else 413;
//   - body must not be empty or only whitespace, and must be valid UTF-8;
//   - body must be one JSON value with nothing after it, and an object;
//   - the fields routing reads must have the right types and values, and the
//     required ones (model, and messages, prompt or input) must be present.
//
// A body with both a syntax error and a field error reports the syntax
// error, wherever the two are. Object keys match exactly (case-sensitive),
// and of duplicate keys the last wins, as in the Python servers behind the
// router. Unknown fields are allowed and only checked for JSON syntax.
//
// On success the Request's Kind matches the path, Model is not empty, and
// Messages (chat, responses) or Prompts (completions) are not empty and are
// valid UTF-8. Parse does not keep body or alias it in the result, and it
// never panics.
func Parse(method, path, contentType string, body []byte, lim Limits) (*Request, error) {
	kind := Classify(method, path)
	if kind == KindOther {
		return &Request{Kind: KindOther}, nil
	}
	if !isJSONMediaType(contentType) {
		return nil, errMediaType(contentType)
	}
	if lim.MaxBodyBytes > 0 && len(body) > lim.MaxBodyBytes {
		return nil, errTooLarge(len(body), lim.MaxBodyBytes)
	}
	if len(body) > maxBodyBytes {
		return nil, errTooLarge(len(body), maxBodyBytes)
	}
	r := reader{data: body}
	if r.atEnd() {
		return nil, errEmptyBody()
	}
	if !utf8.Valid(body) {
		return nil, errEncoding(invalidUTF8At(body))
	}
	req, err := parseObject(kind, &r)
	if err != nil {
		return nil, preferSyntax(body, err)
	}
	req.Kind = kind
	return req, nil
}

// parseObject parses a whole body of the given kind.
func parseObject(kind Kind, r *reader) (*Request, error) {
	if c := r.peek(); c != '{' {
		if err := r.document(); err != nil {
			return nil, err
		}
		return nil, errNotObject(c)
	}
	var req *Request
	var err error
	switch kind {
	case KindChat:
		req, err = parseChat(r)
	case KindCompletion:
		req, err = parseCompletion(r)
	default:
		req, err = parseResponses(r)
	}
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return req, nil
}

// preferSyntax returns the syntax error in body if there is one and err is
// about a field, so that a broken body is reported as such wherever the
// breakage is; otherwise err.
func preferSyntax(body []byte, err error) error {
	if e, ok := err.(*Error); ok && e.Code == CodeInvalidJSON {
		return err
	}
	r := reader{data: body}
	if serr := r.document(); serr != nil {
		return serr
	}
	return err
}

// invalidUTF8At returns the offset of the first byte of b that is not part
// of a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		c, n := utf8.DecodeRune(b[i:])
		if c == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
