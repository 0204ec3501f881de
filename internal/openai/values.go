package openai

import "math"

// This file holds the typed value readers: each reads the value at the
// reader's position, checks its JSON type and reports a wrong one against the
// parameter path p. "Optional" readers treat null like an absent field, as
// OpenAI's API does for optional parameters.

// str reads a string.
func (r *reader) str(p *param) (string, error) {
	if r.peek() != '"' {
		return "", r.typeErr(p, "a string")
	}
	b, err := r.readString(nil, strView)
	return string(b), err
}

// nonEmptyStr reads a string that must not be empty.
func (r *reader) nonEmptyStr(p *param) (string, error) {
	s, err := r.str(p)
	if err == nil && s == "" {
		err = errEmptyString(p)
	}
	return s, err
}

// optStr reads a string or null; present is false for null.
func (r *reader) optStr(p *param) (s string, present bool, err error) {
	if r.peek() == 'n' {
		return "", false, r.literal("null")
	}
	s, err = r.str(p)
	return s, err == nil, err
}

// optBool reads a boolean or null (false).
func (r *reader) optBool(p *param) (bool, error) {
	switch r.peek() {
	case 't':
		return true, r.literal("true")
	case 'f':
		return false, r.literal("false")
	case 'n':
		return false, r.literal("null")
	default:
		return false, r.typeErr(p, "a boolean")
	}
}

// optCount reads a non-negative integer that fits an int, or null; present
// is false for null. A number with a fraction or exponent is a type error,
// as it is for OpenAI.
func (r *reader) optCount(p *param) (n int, present bool, err error) {
	c := r.peek()
	if c == 'n' {
		return 0, false, r.literal("null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return 0, false, r.typeErr(p, "an integer")
	}
	text, err := r.readNumber()
	if err != nil {
		return 0, false, err
	}
	n, ok, isInt := parseCount(text)
	switch {
	case !isInt:
		return 0, false, errType(p, "an integer", c)
	case !ok:
		return 0, false, errValue(p, "%s is not a non-negative integer in range.", quote(string(text)))
	}
	return n, true, nil
}

// parseCount parses the text of a valid JSON number as a non-negative int.
// isInt is false when the number has a fraction or exponent; ok is false
// when it is an integer but negative or too large for an int.
func parseCount(text []byte) (n int, ok, isInt bool) {
	for _, c := range text {
		if c == '.' || c == 'e' || c == 'E' {
			return 0, false, false
		}
	}
	if len(text) > 0 && text[0] == '-' {
		return 0, len(text) == 2 && text[1] == '0', true // -0 is 0
	}
	for _, c := range text {
		d := int(c - '0')
		if n > (math.MaxInt-d)/10 {
			return 0, false, true
		}
		n = n*10 + d
	}
	return n, true, true
}

// optCanon reads any value except null as canonical JSON (see canon), or
// null (nil); want, when not 0, is the one JSON type allowed ('[' or '{').
func (r *reader) optCanon(p *param, want byte) ([]byte, error) {
	c := r.peek()
	if c == 'n' {
		return nil, r.literal("null")
	}
	if want != 0 && c != want {
		return nil, r.typeErr(p, typeName(want))
	}
	return r.canon(nil)
}
