package openai

import (
	"fmt"
	"net/http"
	"unicode/utf8"
)

// maxQuoted is how many bytes of a client's value an error message repeats.
const maxQuoted = 64

// badRequest returns a 400 error about the field at path param ("" for the
// body as a whole).
func badRequest(code, param, format string, args ...any) *Error {
	return &Error{
		Status:  http.StatusBadRequest,
		Type:    TypeInvalidRequest,
		Code:    code,
		Param:   param,
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
	return badRequest(CodeInvalidJSON, "", "We could not parse the JSON body of your request: the body is empty.")
}

func errEncoding(offset int) *Error {
	return badRequest(CodeInvalidEncoding, "", "The request body is not valid UTF-8: invalid byte at offset %d.", offset)
}

func errSyntax(offset int, format string, args ...any) *Error {
	return badRequest(CodeInvalidJSON, "", "We could not parse the JSON body of your request: %s at byte offset %d.",
		fmt.Sprintf(format, args...), offset)
}

func errNotObject(got byte) *Error {
	return badRequest(CodeInvalidType, "", "The request body must be a JSON object, but got %s instead.", typeName(got))
}

func errMissing(p *param) *Error {
	ps := p.String()
	return badRequest(CodeMissingParameter, ps, "Missing required parameter: '%s'.", ps)
}

// errType reports a value of the wrong JSON type; got is the value's first
// byte, want a phrase like "a string".
func errType(p *param, want string, got byte) *Error {
	ps := p.String()
	return badRequest(CodeInvalidType, ps, "Invalid type for '%s': expected %s, but got %s instead.", ps, want, typeName(got))
}

func errValue(p *param, format string, args ...any) *Error {
	ps := p.String()
	return badRequest(CodeInvalidValue, ps, "Invalid value for '%s': %s", ps, fmt.Sprintf(format, args...))
}

func errEmptyArray(p *param) *Error {
	ps := p.String()
	return badRequest(CodeEmptyArray, ps,
		"Invalid '%s': empty array. Expected an array with minimum length 1, but got an empty array instead.", ps)
}

func errEmptyString(p *param) *Error {
	ps := p.String()
	return badRequest(CodeEmptyString, ps,
		"Invalid '%s': empty string. Expected a string with minimum length 1, but got an empty string instead.", ps)
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
