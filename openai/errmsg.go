package openai

import (
	"fmt"
	"net/http"
	"unicode/utf8"
)

// maxQuoted is how many bytes of a client's value an error message repeats.
const maxQuoted = 64

func badRequest(code string, p *param, format string, args ...any) *Error {
	return &Error{
		Status:  http.StatusBadRequest,
		Type:    TypeInvalidRequest,
		Code:    code,
		Param:   p.String(),
		Message: fmt.Sprintf(format, args...),
	}
}

func errMediaType(contentType string) *Error {
	return &Error{
		Status:  http.StatusUnsupportedMediaType,
		Type:    TypeInvalidRequest,
		Code:    CodeUnsupportedMediaType,
		Message: fmt.Sprintf("Unsupported Content-Type %s: the request body must be application/json.", quote(contentType)),
	}
}

func errTooLarge(size, limit int) *Error {
	return &Error{
		Status:  http.StatusRequestEntityTooLarge,
		Type:    TypeInvalidRequest,
		Code:    CodeRequestTooLarge,
		Message: fmt.Sprintf("The request body is %d bytes, more than the limit of %d bytes.", size, limit),
	}
}

func errEmptyBody() *Error {
	return badRequest(CodeInvalidJSON, nil, "We could not parse the JSON body of your request: the body is empty.")
}

func errEncoding(offset int) *Error {
	return badRequest(CodeInvalidEncoding, nil, "The request body is not valid UTF-8: invalid byte at offset %d.", offset)
}

func errSyntax(offset int, format string, args ...any) *Error {
	return badRequest(CodeInvalidJSON, nil, "We could not parse the JSON body of your request: %s at byte offset %d.",
		fmt.Sprintf(format, args...), offset)
}

func errNotObject(got byte) *Error {
	return badRequest(CodeInvalidType, nil, "The request body must be a JSON object, but got %s instead.", typeName(got))
}

func errMissing(p *param) *Error {
	return badRequest(CodeMissingParameter, p, "Missing required parameter: '%s'.", p)
}

// errType reports a value of the wrong JSON type; got is the value's first
// byte, want a phrase like "a string".
func errType(p *param, want string, got byte) *Error {
	return badRequest(CodeInvalidType, p, "Invalid type for '%s': expected %s, but got %s instead.", p, want, typeName(got))
}

func errValue(p *param, format string, args ...any) *Error {
	return badRequest(CodeInvalidValue, p, "Invalid value for '%s': %s", p, fmt.Sprintf(format, args...))
}

func errEmptyArray(p *param) *Error {
	return badRequest(CodeEmptyArray, p,
		"Invalid '%s': empty array. Expected an array with minimum length 1, but got an empty array instead.", p)
}

func errEmptyString(p *param) *Error {
	return badRequest(CodeEmptyString, p,
		"Invalid '%s': empty string. Expected a string with minimum length 1, but got an empty string instead.", p)
}

// typeName names the JSON type of a value from its first byte.
func typeName(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	default:
		return "an invalid value"
	}
}

// isValueStart reports whether c can begin a JSON value.
func isValueStart(c byte) bool { return typeName(c) != "an invalid value" }

// quote returns s in single quotes for an error message, cut to maxQuoted
// bytes on a rune boundary.
func quote(s string) string {
	if len(s) > maxQuoted {
		n := maxQuoted
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	return "'" + s + "'"
}
