package openai

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"testing"
)

const (
	chatPath       = "/v1/chat/completions"
	completionPath = "/v1/completions"
	responsesPath  = "/v1/responses"
)

// wantMarker is the marker Parse should produce for a part of type typ
// whose canonical JSON is canonical, computed independently with hash/fnv.
func wantMarker(typ, canonical string) string {
	h := fnv.New64a()
	h.Write([]byte(canonical))
	return fmt.Sprintf("<%s:%016x>", typ, h.Sum64())
}

// parseOK parses body as a POST to path and fails the test on error.
func parseOK(t *testing.T, path, body string) *Request {
	t.Helper()
	req, err := Parse("POST", path, "application/json", []byte(body), Limits{})
	if err != nil {
		t.Fatalf("Parse(%s) error = %v", body, err)
	}
	return req
}

// checkRequest compares the parsed request with want field by field.
func checkRequest(t *testing.T, got *Request, want Request) {
	t.Helper()
	if got.Kind != want.Kind || got.Model != want.Model || got.Stream != want.Stream ||
		got.MaxTokens != want.MaxTokens || got.User != want.User {
		t.Errorf("Parse() = {Kind:%v Model:%q Stream:%v MaxTokens:%d User:%q}, want {Kind:%v Model:%q Stream:%v MaxTokens:%d User:%q}",
			got.Kind, got.Model, got.Stream, got.MaxTokens, got.User,
			want.Kind, want.Model, want.Stream, want.MaxTokens, want.User)
	}
	if !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Errorf("Parse().Messages = %q, want %q", got.Messages, want.Messages)
	}
	if !reflect.DeepEqual(got.Prompts, want.Prompts) {
		t.Errorf("Parse().Prompts = %q, want %q", got.Prompts, want.Prompts)
	}
}
