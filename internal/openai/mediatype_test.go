package openai

import "testing"

func TestIsJSONMediaType(t *testing.T) {
	tests := []struct {
		contentType string
		want        bool
	}{
		{"", true},
		{"  ", true},
		{"application/json", true},
		{"Application/JSON", true},
		{"application/json; charset=utf-8", true},
		{"application/json;charset=UTF-8", true},
		{`application/json; charset="utf-8"`, true},
		{"application/json; charset=utf8", true},
		{"application/json; charset=us-ascii", true},
		{"application/json; boundary=x; charset=utf-8", true},
		{"application/json;", true},
		{" application/json ", true},
		{"application/json; charset=iso-8859-1", false},
		{"application/json; charset=utf-16", false},
		{"text/plain", false},
		{"text/json", false},
		{"application/jsonl", false},
		{"application/x-ndjson", false},
		{"application/vnd.api+json", false},
		{"multipart/form-data; boundary=x", false},
		{"; charset=utf-8", false},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			if got := isJSONMediaType(tt.contentType); got != tt.want {
				t.Errorf("isJSONMediaType(%q) = %v, want %v", tt.contentType, got, tt.want)
			}
		})
	}
}
