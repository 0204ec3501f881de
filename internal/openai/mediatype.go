package openai

import "strings"

// isJSONMediaType reports whether a Content-Type header value announces JSON:
// application/json, matched case-insensitively, with optional parameters. A
// missing (empty) header counts as JSON, as many clients omit it. A charset
// parameter, if present, must name UTF-8 or its subset US-ASCII: a body in
// any other charset could not be read as JSON text anyway.
func isJSONMediaType(contentType string) bool {
	mt, params, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	if mt == "" && strings.TrimSpace(params) == "" {
		return true
	}
	if !strings.EqualFold(mt, "application/json") {
		return false
	}
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(k), "charset") {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if !strings.EqualFold(v, "utf-8") && !strings.EqualFold(v, "utf8") && !strings.EqualFold(v, "us-ascii") {
			return false
		}
	}
	return true
}
