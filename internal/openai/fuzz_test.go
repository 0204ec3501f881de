package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzRequest turns FuzzParse's selector into a path, content type and
// limits: mostly JSON without a limit, sometimes text/plain or a small limit.
func fuzzRequest(sel uint8) (path, contentType string, lim Limits) {
	paths := [...]string{chatPath, completionPath, responsesPath, chatPath + "/?a=b", "/v1/models"}
	path, contentType = paths[int(sel%8)%len(paths)], "application/json"
	switch sel >> 5 {
	case 6:
		contentType = "text/plain"
	case 7:
		lim.MaxBodyBytes = 64
	}
	return path, contentType, lim
}

func FuzzParse(f *testing.F) {
	seeds := []struct {
		sel  uint8
		body string
	}{
		{0, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{0, `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":"auto","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a\n\u00e9"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]},{"role":"tool","tool_call_id":"1","content":"r"}]}`},
		{0, `{"model":"m","messages":[{"role":"robot","content":"x"}]}`},
		{0, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":7}]}]}`},
		{0, `{"model":"m","messages":[`},
		{3, `{"model":"m","messages":[{"role":"user","content":"\ud83d\ude00 \ud800"}],"max_tokens":5}`},
		{1, `{"model":"m","prompt":"once upon a time"}`},
		{1, `{"model":"m","prompt":["a","b"],"max_tokens":3}`},
		{1, `{"model":"m","prompt":[1,2,3]}`},
		{1, `{"model":"m","prompt":[[1,2],[3]]}`},
		{1, `{"model":"m","prompt":[1,"a"]}`},
		{1, `{"model":"m","prompt":""}`},
		{2, `{"model":"m","input":"hello","instructions":"be brief"}`},
		{2, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","call_id":"c","name":"w","arguments":"{}"}]}`},
		{2, `{"model":"m","input":[{"content":"x"}]}`},
		{2, `{"model":"m","input":[]}`},
		{4, `not even json`},
		{0, ``},
		{1, `   `},
		{2, "{\"model\":\"\xff\"}"},
		{0, `[]`},
		{0, `{} {}`},
		{0, `{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`},
		{192, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{225, `{"model":"m","prompt":"a prompt long enough to go over the sixty-four byte limit"}`},
	}
	for _, s := range seeds {
		f.Add(s.sel, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, sel uint8, body []byte) {
		path, contentType, lim := fuzzRequest(sel)
		orig := bytes.Clone(body)
		req, err := Parse("POST", path, contentType, body, lim)
		if !bytes.Equal(body, orig) {
			t.Fatalf("Parse() changed the body from %q to %q", orig, body)
		}
		kind := Classify("POST", path)
		if err != nil {
			checkFuzzError(t, kind, contentType, body, lim, err)
			return
		}
		if req.Kind != kind {
			t.Fatalf("Parse(%q).Kind = %v, want %v", path, req.Kind, kind)
		}
		if kind == KindOther {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("Parse(%q) succeeded on invalid JSON", body)
		}
		if req.Model == "" || !utf8.ValidString(req.Model) || !utf8.ValidString(req.User) {
			t.Fatalf("Parse(%q) = Model %q User %q, want a non-empty valid UTF-8 model", body, req.Model, req.User)
		}
		switch kind {
		case KindCompletion:
			if len(req.Prompts) == 0 || req.Messages != nil {
				t.Fatalf("Parse(%q) = Prompts %q Messages %q, want only Prompts, not empty", body, req.Prompts, req.Messages)
			}
			for _, p := range req.Prompts {
				if !utf8.ValidString(p) {
					t.Fatalf("Parse(%q).Prompts = %q, not valid UTF-8", body, req.Prompts)
				}
			}
		default:
			if len(req.Messages) == 0 || req.Prompts != nil {
				t.Fatalf("Parse(%q) = Messages %q Prompts %q, want only Messages, not empty", body, req.Messages, req.Prompts)
			}
			for _, m := range req.Messages {
				if !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content) || m.Role == "" {
					t.Fatalf("Parse(%q).Messages = %q, want non-empty roles and valid UTF-8", body, req.Messages)
				}
			}
		}
	})
}

// checkFuzzError checks an error from Parse: an *Error with an allowed
// status and valid JSON, whose class agrees with encoding/json and
// unicode/utf8 about the body.
func checkFuzzError(t *testing.T, kind Kind, contentType string, body []byte, lim Limits, err error) {
	t.Helper()
	e, ok := AsError(err)
	if !ok {
		t.Fatalf("Parse() error = %v (%T), want an *Error", err, err)
	}
	if kind == KindOther {
		t.Fatalf("Parse() error = %v for a KindOther path, want none", err)
	}
	switch e.Status {
	case 400, 413, 415:
	default:
		t.Fatalf("Parse() error status = %d, want 400, 413 or 415", e.Status)
	}
	if !json.Valid(e.JSON()) || e.Type != TypeInvalidRequest {
		t.Fatalf("Parse() error JSON() = %s, want valid JSON of type %s", e.JSON(), TypeInvalidRequest)
	}
	if contentType != "application/json" || (lim.MaxBodyBytes > 0 && len(body) > lim.MaxBodyBytes) {
		return // 415 or 413: the body was not read
	}
	if e.Status != 400 {
		t.Fatalf("Parse() error status = %d, want 400", e.Status)
	}
	if strings.Contains(e.Message, "nested deeper") {
		return // encoding/json allows deeper nesting
	}
	empty := len(bytes.TrimLeft(body, " \t\r\n")) == 0
	switch {
	case !empty && !utf8.Valid(body):
		if e.Code != CodeInvalidEncoding {
			t.Fatalf("Parse(%q) error code = %q, want %q", body, e.Code, CodeInvalidEncoding)
		}
	case (e.Code == CodeInvalidJSON) != !json.Valid(body):
		t.Fatalf("Parse(%q) error code = %q (%s), but json.Valid = %v", body, e.Code, e.Message, json.Valid(body))
	}
}

// FuzzReadString checks the reader's string decoding against encoding/json.
func FuzzReadString(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"\n\t\"\\\/"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800x"`, `"\x"`, "\"\x01\"", `"abc`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' || !utf8.Valid(data) {
			return
		}
		r := reader{data: data}
		got, err := r.readString(nil, strView)
		if err == nil {
			err = r.end()
		}
		var want string
		wantErr := json.Unmarshal(data, &want)
		if (err == nil) != (wantErr == nil) || (err == nil && string(got) != want) {
			t.Fatalf("readString(%q) = %q, %v; encoding/json: %q, %v", data, got, err, want, wantErr)
		}
	})
}
