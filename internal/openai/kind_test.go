package openai

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path string
		want         Kind
	}{
		{"POST", "/v1/chat/completions", KindChat},
		{"POST", "/v1/chat/completions/", KindChat},
		{"POST", "/v1/chat/completions?api-version=2024", KindChat},
		{"POST", "/v1/chat/completions/?x=1&y=2", KindChat},
		{"POST", "/v1/completions", KindCompletion},
		{"POST", "/v1/completions/", KindCompletion},
		{"POST", "/v1/completions?", KindCompletion},
		{"POST", "/v1/responses", KindResponses},
		{"POST", "/v1/responses/?stream=true", KindResponses},
		{"GET", "/v1/chat/completions", KindOther},
		{"post", "/v1/chat/completions", KindOther},
		{"PUT", "/v1/completions", KindOther},
		{"", "/v1/responses", KindOther},
		{"POST", "/openai/v1/chat/completions", KindOther},
		{"POST", "/v1/chat/completions//", KindOther},
		{"POST", "/V1/chat/completions", KindOther},
		{"POST", "/v1/chat/completionsx", KindOther},
		{"POST", "/v1/responses/abc", KindOther},
		{"POST", "/v1/models", KindOther},
		{"POST", "/v1/embeddings", KindOther},
		{"POST", "", KindOther},
		{"POST", "/", KindOther},
		{"POST", "?/v1/completions", KindOther},
		{"POST", "v1/completions", KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := Classify(tt.method, tt.path); got != tt.want {
				t.Errorf("Classify(%q, %q) = %v, want %v", tt.method, tt.path, got, tt.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		k    Kind
		want string
	}{
		{KindOther, "other"},
		{KindChat, "chat"},
		{KindCompletion, "completion"},
		{KindResponses, "responses"},
		{Kind(200), "other"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.k.String(); got != tt.want {
				t.Errorf("Kind(%d).String() = %q, want %q", tt.k, got, tt.want)
			}
		})
	}
}

// TestParseOtherIgnoresBody checks that requests that are not inference
// requests are classified without reading the content type or the body.
func TestParseOtherIgnoresBody(t *testing.T) {
	tests := []struct {
		name, method, path, contentType, body string
	}{
		{"get chat", "GET", "/v1/chat/completions", "text/plain", "not json"},
		{"models", "POST", "/v1/models", "application/json", `{"model":`},
		{"prefixed", "POST", "/openai/v1/completions", "", "\xff\xfe"},
		{"health", "GET", "/health", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Parse(tt.method, tt.path, tt.contentType, []byte(tt.body), Limits{MaxBodyBytes: 1})
			if err != nil {
				t.Fatalf("Parse() error = %v, want nil", err)
			}
			if want := (Request{Kind: KindOther}); req.Kind != want.Kind || req.Model != "" || req.Messages != nil || req.Prompts != nil {
				t.Errorf("Parse() = %+v, want %+v", *req, want)
			}
		})
	}
}
