package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// TypeInvalidRequest is the OpenAI error type of every error Parse returns.
const TypeInvalidRequest = "invalid_request_error"

// Error codes set in Error.Code.
const (
	// CodeUnsupportedMediaType: the Content-Type is not JSON (status 415).
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeRequestTooLarge: the body exceeds Limits.MaxBodyBytes (status 413).
	CodeRequestTooLarge = "request_too_large"
	// CodeInvalidJSON: the body is empty, is not JSON, has data after the
	// top-level value, or nests deeper than the reader allows.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidEncoding: the body is not valid UTF-8.
	CodeInvalidEncoding = "invalid_encoding"
	// CodeMissingParameter: a required field is absent or null.
	CodeMissingParameter = "missing_required_parameter"
	// CodeInvalidType: a field has the wrong JSON type, or the body is JSON
	// but not an object (then Param is empty).
	CodeInvalidType = "invalid_type"
	// CodeInvalidValue: a field has the right type but a value not allowed.
	CodeInvalidValue = "invalid_value"
	// CodeEmptyArray: an array that must not be empty is.
	CodeEmptyArray = "empty_array"
	// CodeEmptyString: a string that must not be empty is.
	CodeEmptyString = "empty_string"
)

// Error is a client error in OpenAI's format. Status is the HTTP status to
// answer with (400, 413 or 415); Param is the offending field's path, such as
// messages[2].content, or empty when the error is about the body as a whole.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

// Error returns a one-line description for logs.
func (e *Error) Error() string {
	s := "openai: " + strconv.Itoa(e.Status) + " " + e.Type + ": " + e.Message
	if e.Param != "" {
		s += " (param " + e.Param + ")"
	}
	return s
}

// JSON returns the error as the body of an OpenAI error response:
// {"error":{"message":...,"type":...,"param":...,"code":...}}, with param and
// code null when empty. It is always valid JSON.
func (e *Error) JSON() []byte {
	type inner struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	type outer struct {
		Error inner `json:"error"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding strings and nil pointers cannot fail.
	_ = enc.Encode(outer{inner{e.Message, e.Type, nilIfEmpty(e.Param), nilIfEmpty(e.Code)}})
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AsError reports whether err is, or wraps, an *Error, and returns it.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}
