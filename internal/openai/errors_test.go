package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	const (
		okChat   = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		jsonType = "application/json"
	)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name        string
		path        string
		contentType string
		body        string
		lim         Limits
		status      int
		code        string
		param       string
		msg         string // a substring of the message, when it matters
	}{
		// The body as a whole.
		{name: "text/plain", path: chatPath, contentType: "text/plain", body: okChat, status: 415, code: CodeUnsupportedMediaType},
		{name: "form", path: completionPath, contentType: "application/x-www-form-urlencoded", body: "a=b", status: 415, code: CodeUnsupportedMediaType},
		{name: "latin-1 charset", path: responsesPath, contentType: "application/json; charset=latin1", body: okChat, status: 415, code: CodeUnsupportedMediaType},
		{name: "415 before 413", path: chatPath, contentType: "text/plain", body: okChat, lim: Limits{MaxBodyBytes: 1}, status: 415, code: CodeUnsupportedMediaType},
		{name: "too large", path: chatPath, body: okChat, lim: Limits{MaxBodyBytes: len(okChat) - 1}, status: 413, code: CodeRequestTooLarge, msg: "limit of 56 bytes"},
		{name: "too large even if invalid", path: completionPath, body: "xxxxxxxx", lim: Limits{MaxBodyBytes: 4}, status: 413, code: CodeRequestTooLarge},
		{name: "empty body", path: chatPath, body: "", status: 400, code: CodeInvalidJSON, msg: "empty"},
		{name: "whitespace body", path: responsesPath, body: " \r\n\t ", status: 400, code: CodeInvalidJSON, msg: "empty"},
		{name: "invalid utf-8 in a string", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":"a` + "\xff" + `"}]}`, status: 400, code: CodeInvalidEncoding, msg: "offset 52"},
		{name: "utf-16 surrogate bytes", path: chatPath, body: "{\"model\":\"\xed\xa0\x80\"}", status: 400, code: CodeInvalidEncoding},
		{name: "truncated", path: chatPath, body: `{"model":`, status: 400, code: CodeInvalidJSON, msg: "byte offset 9"},
		{name: "bad literal", path: chatPath, body: `{"model":"m","stream":tru}`, status: 400, code: CodeInvalidJSON, msg: "byte offset 25"},
		{name: "single quotes", path: chatPath, body: `{'model':'m'}`, status: 400, code: CodeInvalidJSON, msg: "byte offset 1"},
		{name: "trailing comma", path: chatPath, body: `{"model":"m",}`, status: 400, code: CodeInvalidJSON, msg: "byte offset 13"},
		{name: "leading zero", path: chatPath, body: `{"max_tokens":01}`, status: 400, code: CodeInvalidJSON, msg: "byte offset 15"},
		{name: "raw newline in string", path: chatPath, body: "{\"model\":\"a\nb\"}", status: 400, code: CodeInvalidJSON, msg: "byte offset 11"},
		{name: "bad escape", path: chatPath, body: `{"model":"\x41"}`, status: 400, code: CodeInvalidJSON},
		{name: "short unicode escape", path: chatPath, body: `{"model":"\u12"}`, status: 400, code: CodeInvalidJSON},
		{name: "NUL byte", path: chatPath, body: "{\"model\":\x00}", status: 400, code: CodeInvalidJSON, msg: "byte offset 9"},
		{name: "top level array", path: chatPath, body: `[{"model":"m"}]`, status: 400, code: CodeInvalidType, msg: "an array"},
		{name: "top level string", path: responsesPath, body: `"hello"`, status: 400, code: CodeInvalidType, msg: "a string"},
		{name: "top level null", path: completionPath, body: `null`, status: 400, code: CodeInvalidType, msg: "null"},
		{name: "top level garbage", path: completionPath, body: `hello`, status: 400, code: CodeInvalidJSON, msg: "byte offset 0"},
		{name: "trailing object", path: chatPath, body: okChat + ` {}`, status: 400, code: CodeInvalidJSON, msg: "byte offset 58"},
		{name: "trailing garbage", path: chatPath, body: okChat + "x", status: 400, code: CodeInvalidJSON},
		{name: "trailing after non-object", path: chatPath, body: `[] []`, status: 400, code: CodeInvalidJSON},
		{name: "too deep in an unknown field", path: chatPath, body: `{"x":` + deep(maxDepth) + `}`, status: 400, code: CodeInvalidJSON, msg: "nested deeper"},
		{name: "too deep in tools", path: chatPath, body: `{"tools":[{"a":` + deep(maxDepth) + `}]}`, status: 400, code: CodeInvalidJSON, msg: "nested deeper"},
		{name: "syntax error wins over an earlier field error", path: chatPath, body: `{"model":5,"messages":[}`, status: 400, code: CodeInvalidJSON},
		{name: "syntax error wins over a missing field", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}]} x`, status: 400, code: CodeInvalidJSON},

		// Common fields.
		{name: "model missing", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}]}`, status: 400, code: CodeMissingParameter, param: "model"},
		{name: "model null", path: completionPath, body: `{"model":null,"prompt":"x"}`, status: 400, code: CodeMissingParameter, param: "model"},
		{name: "model empty", path: responsesPath, body: `{"model":"","input":"x"}`, status: 400, code: CodeEmptyString, param: "model"},
		{name: "model a number", path: chatPath, body: `{"model":5,"messages":[]}`, status: 400, code: CodeInvalidType, param: "model", msg: "got a number"},
		{name: "stream a string", path: chatPath, body: `{"model":"m","stream":"yes","messages":[]}`, status: 400, code: CodeInvalidType, param: "stream"},
		{name: "stream a number", path: responsesPath, body: `{"model":"m","stream":1,"input":"x"}`, status: 400, code: CodeInvalidType, param: "stream"},
		{name: "user an object", path: completionPath, body: `{"model":"m","prompt":"x","user":{}}`, status: 400, code: CodeInvalidType, param: "user"},
		{name: "tools an object", path: chatPath, body: `{"model":"m","tools":{},"messages":[]}`, status: 400, code: CodeInvalidType, param: "tools"},
		{name: "tool not an object", path: responsesPath, body: `{"model":"m","tools":[{},"x"],"input":"x"}`, status: 400, code: CodeInvalidType, param: "tools[1]"},
		{name: "max_tokens negative", path: chatPath, body: `{"model":"m","max_tokens":-1,"messages":[]}`, status: 400, code: CodeInvalidValue, param: "max_tokens"},
		{name: "max_tokens fractional", path: completionPath, body: `{"model":"m","max_tokens":1.5,"prompt":"x"}`, status: 400, code: CodeInvalidType, param: "max_tokens"},
		{name: "max_tokens exponent", path: completionPath, body: `{"model":"m","max_tokens":1e3,"prompt":"x"}`, status: 400, code: CodeInvalidType, param: "max_tokens"},
		{name: "max_tokens huge", path: chatPath, body: `{"model":"m","max_tokens":99999999999999999999,"messages":[]}`, status: 400, code: CodeInvalidValue, param: "max_tokens"},
		{name: "max_tokens a string", path: chatPath, body: `{"model":"m","max_completion_tokens":"5","messages":[]}`, status: 400, code: CodeInvalidType, param: "max_completion_tokens"},
		{name: "max_output_tokens a bool", path: responsesPath, body: `{"model":"m","max_output_tokens":true,"input":"x"}`, status: 400, code: CodeInvalidType, param: "max_output_tokens"},

		// Chat completions.
		{name: "messages missing", path: chatPath, body: `{"model":"m"}`, status: 400, code: CodeMissingParameter, param: "messages"},
		{name: "messages null", path: chatPath, body: `{"model":"m","messages":null}`, status: 400, code: CodeMissingParameter, param: "messages"},
		{name: "messages empty", path: chatPath, body: `{"model":"m","messages":[]}`, status: 400, code: CodeEmptyArray, param: "messages"},
		{name: "messages an object", path: chatPath, body: `{"model":"m","messages":{"role":"user"}}`, status: 400, code: CodeInvalidType, param: "messages", msg: "got an object"},
		{name: "messages a string", path: chatPath, body: `{"model":"m","messages":"hi"}`, status: 400, code: CodeInvalidType, param: "messages"},
		{name: "message a string", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":"x"},"hi"]}`, status: 400, code: CodeInvalidType, param: "messages[1]"},
		{name: "role missing", path: chatPath, body: `{"model":"m","messages":[{"content":"x"}]}`, status: 400, code: CodeMissingParameter, param: "messages[0].role"},
		{name: "role unknown", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":"x"},{"role":"robot","content":"x"}]}`, status: 400, code: CodeInvalidValue, param: "messages[2].role", msg: "'robot'"},
		{name: "role a number", path: chatPath, body: `{"model":"m","messages":[{"role":1,"content":"x"}]}`, status: 400, code: CodeInvalidType, param: "messages[0].role"},
		{name: "role is case-sensitive", path: chatPath, body: `{"model":"m","messages":[{"role":"User","content":"x"}]}`, status: 400, code: CodeInvalidValue, param: "messages[0].role"},
		{name: "content a number", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":"x"},{"role":"user","content":42}]}`, status: 400, code: CodeInvalidType, param: "messages[2].content", msg: "got a number"},
		{name: "content an object", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":{"type":"text"}}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content"},
		{name: "user content missing", path: chatPath, body: `{"model":"m","messages":[{"role":"user"}]}`, status: 400, code: CodeMissingParameter, param: "messages[0].content"},
		{name: "user content null", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":null}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content", msg: "got null"},
		{name: "tool content null", path: chatPath, body: `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":null}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content"},
		{name: "part a string", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},"b"]}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content[1]"},
		{name: "part type missing", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]}`, status: 400, code: CodeMissingParameter, param: "messages[0].content[0].type"},
		{name: "part type empty", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"type":""}]}]}`, status: 400, code: CodeEmptyString, param: "messages[0].content[0].type"},
		{name: "part type a number", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"type":1}]}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content[0].type"},
		{name: "text part text missing", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, status: 400, code: CodeMissingParameter, param: "messages[0].content[0].text"},
		{name: "text part text a number", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":["x"]},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":7}]}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content[0]"},
		{name: "text part text an array", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":[]}]}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content[1].text", msg: "got an array"},
		{name: "refusal part refusal missing", path: chatPath, body: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"refusal"}]}]}`, status: 400, code: CodeMissingParameter, param: "messages[0].content[0].refusal"},
		{name: "refusal part refusal null", path: chatPath, body: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"refusal","refusal":null}]}]}`, status: 400, code: CodeInvalidType, param: "messages[0].content[0].refusal"},
		{name: "tool_calls an object", path: chatPath, body: `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, status: 400, code: CodeInvalidType, param: "messages[0].tool_calls"},
		{name: "function_call a string", path: chatPath, body: `{"model":"m","messages":[{"role":"assistant","function_call":"f"}]}`, status: 400, code: CodeInvalidType, param: "messages[0].function_call"},
		{name: "tool_call_id a number", path: chatPath, body: `{"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":1}]}`, status: 400, code: CodeInvalidType, param: "messages[0].tool_call_id"},
		{name: "name a bool", path: chatPath, body: `{"model":"m","messages":[{"role":"user","content":"x","name":true}]}`, status: 400, code: CodeInvalidType, param: "messages[0].name"},

		// Completions.
		{name: "prompt missing", path: completionPath, body: `{"model":"m"}`, status: 400, code: CodeMissingParameter, param: "prompt"},
		{name: "prompt null", path: completionPath, body: `{"model":"m","prompt":null}`, status: 400, code: CodeMissingParameter, param: "prompt"},
		{name: "prompt empty string", path: completionPath, body: `{"model":"m","prompt":""}`, status: 400, code: CodeEmptyString, param: "prompt"},
		{name: "prompt empty array", path: completionPath, body: `{"model":"m","prompt":[]}`, status: 400, code: CodeEmptyArray, param: "prompt"},
		{name: "prompt a number", path: completionPath, body: `{"model":"m","prompt":5}`, status: 400, code: CodeInvalidType, param: "prompt"},
		{name: "prompt an object", path: completionPath, body: `{"model":"m","prompt":{"text":"x"}}`, status: 400, code: CodeInvalidType, param: "prompt"},
		{name: "prompt empty string element", path: completionPath, body: `{"model":"m","prompt":["a",""]}`, status: 400, code: CodeEmptyString, param: "prompt[1]"},
		{name: "prompt mixed string then id", path: completionPath, body: `{"model":"m","prompt":["a",1]}`, status: 400, code: CodeInvalidType, param: "prompt[1]", msg: "expected a string"},
		{name: "prompt mixed id then string", path: completionPath, body: `{"model":"m","prompt":[1,2,"a"]}`, status: 400, code: CodeInvalidType, param: "prompt[2]", msg: "expected a token id"},
		{name: "prompt bool element", path: completionPath, body: `{"model":"m","prompt":[true]}`, status: 400, code: CodeInvalidType, param: "prompt[0]"},
		{name: "prompt null element", path: completionPath, body: `{"model":"m","prompt":[null]}`, status: 400, code: CodeInvalidType, param: "prompt[0]"},
		{name: "prompt negative id", path: completionPath, body: `{"model":"m","prompt":[1,-2]}`, status: 400, code: CodeInvalidValue, param: "prompt[1]"},
		{name: "prompt fractional id", path: completionPath, body: `{"model":"m","prompt":[1.5]}`, status: 400, code: CodeInvalidType, param: "prompt[0]"},
		{name: "prompt empty inner array", path: completionPath, body: `{"model":"m","prompt":[[1],[]]}`, status: 400, code: CodeEmptyArray, param: "prompt[1]"},
		{name: "prompt string in inner array", path: completionPath, body: `{"model":"m","prompt":[[1,"a"]]}`, status: 400, code: CodeInvalidType, param: "prompt[0][1]"},
		{name: "prompt nested too far", path: completionPath, body: `{"model":"m","prompt":[[[1]]]}`, status: 400, code: CodeInvalidType, param: "prompt[0][0]"},
		{name: "prompt id after inner array", path: completionPath, body: `{"model":"m","prompt":[[1],2]}`, status: 400, code: CodeInvalidType, param: "prompt[1]"},

		// Responses.
		{name: "input missing", path: responsesPath, body: `{"model":"m"}`, status: 400, code: CodeMissingParameter, param: "input"},
		{name: "input empty string", path: responsesPath, body: `{"model":"m","input":""}`, status: 400, code: CodeEmptyString, param: "input"},
		{name: "input empty array", path: responsesPath, body: `{"model":"m","input":[]}`, status: 400, code: CodeEmptyArray, param: "input"},
		{name: "input a number", path: responsesPath, body: `{"model":"m","input":3}`, status: 400, code: CodeInvalidType, param: "input"},
		{name: "instructions a number", path: responsesPath, body: `{"model":"m","input":"x","instructions":3}`, status: 400, code: CodeInvalidType, param: "instructions"},
		{name: "item a string", path: responsesPath, body: `{"model":"m","input":["hi"]}`, status: 400, code: CodeInvalidType, param: "input[0]"},
		{name: "item without type or role", path: responsesPath, body: `{"model":"m","input":[{"content":"x"}]}`, status: 400, code: CodeMissingParameter, param: "input[0].type"},
		{name: "item type empty", path: responsesPath, body: `{"model":"m","input":[{"type":""}]}`, status: 400, code: CodeEmptyString, param: "input[0].type"},
		{name: "item type a number", path: responsesPath, body: `{"model":"m","input":[{"type":5}]}`, status: 400, code: CodeInvalidType, param: "input[0].type"},
		{name: "message item without role", path: responsesPath, body: `{"model":"m","input":[{"type":"message","content":"x"}]}`, status: 400, code: CodeMissingParameter, param: "input[0].role"},
		{name: "message item role unknown", path: responsesPath, body: `{"model":"m","input":[{"role":"user","content":"x"},{"role":"tool","content":"x"}]}`, status: 400, code: CodeInvalidValue, param: "input[1].role"},
		{name: "message item role a number", path: responsesPath, body: `{"model":"m","input":[{"role":1,"content":"x"}]}`, status: 400, code: CodeInvalidType, param: "input[0].role"},
		{name: "message item without content", path: responsesPath, body: `{"model":"m","input":[{"role":"user"}]}`, status: 400, code: CodeMissingParameter, param: "input[0].content"},
		{name: "message item content null", path: responsesPath, body: `{"model":"m","input":[{"role":"assistant","content":null}]}`, status: 400, code: CodeInvalidType, param: "input[0].content"},
		{name: "message item content a number", path: responsesPath, body: `{"model":"m","input":[{"role":"user","content":1}]}`, status: 400, code: CodeInvalidType, param: "input[0].content"},
		{name: "message item part text missing", path: responsesPath, body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, status: 400, code: CodeMissingParameter, param: "input[0].content[0].text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := tt.contentType
			if ct == "" {
				ct = jsonType
			}
			req, err := Parse("POST", tt.path, ct, []byte(tt.body), tt.lim)
			if err == nil {
				t.Fatalf("Parse(%s) = %+v, want an error", tt.body, *req)
			}
			if req != nil {
				t.Errorf("Parse() request = %+v, want nil with an error", *req)
			}
			e, ok := AsError(err)
			if !ok {
				t.Fatalf("AsError(%v) = false, want an *Error", err)
			}
			if e.Status != tt.status || e.Code != tt.code || e.Param != tt.param || e.Type != TypeInvalidRequest {
				t.Errorf("Parse() error = {Status:%d Code:%q Param:%q Type:%q}, want {Status:%d Code:%q Param:%q Type:%q}\nmessage: %s",
					e.Status, e.Code, e.Param, e.Type, tt.status, tt.code, tt.param, TypeInvalidRequest, e.Message)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("Parse() error message = %q, want it to contain %q", e.Message, tt.msg)
			}
			checkErrorJSON(t, e)
		})
	}
}

// checkErrorJSON checks that e.JSON() is OpenAI's error shape with e's
// fields, param and code null when empty.
func checkErrorJSON(t *testing.T, e *Error) {
	t.Helper()
	var got map[string]map[string]any
	if err := json.Unmarshal(e.JSON(), &got); err != nil {
		t.Fatalf("JSON() = %s, not valid JSON: %v", e.JSON(), err)
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	want := map[string]any{"message": e.Message, "type": e.Type, "param": nullable(e.Param), "code": nullable(e.Code)}
	if len(got) != 1 || len(got["error"]) != len(want) {
		t.Fatalf("JSON() = %s, want exactly {\"error\":{message,type,param,code}}", e.JSON())
	}
	for k, v := range want {
		if g, ok := got["error"][k]; !ok || g != v {
			t.Errorf("JSON() error.%s = %#v, want %#v", k, g, v)
		}
	}
}

func TestErrorFormats(t *testing.T) {
	tests := []struct {
		name      string
		err       *Error
		wantError string
		wantJSON  string
	}{
		{
			name:      "with param and code",
			err:       &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidType, Param: "messages[2].content", Message: "Invalid type."},
			wantError: "openai: 400 invalid_request_error: Invalid type. (param messages[2].content)",
			wantJSON:  `{"error":{"message":"Invalid type.","type":"invalid_request_error","param":"messages[2].content","code":"invalid_type"}}`,
		},
		{
			name:      "without param or code",
			err:       &Error{Status: 400, Type: TypeInvalidRequest, Message: `bad "<json>" & more`},
			wantError: `openai: 400 invalid_request_error: bad "<json>" & more`,
			wantJSON:  `{"error":{"message":"bad \"<json>\" & more","type":"invalid_request_error","param":null,"code":null}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.wantError {
				t.Errorf("Error() = %q, want %q", got, tt.wantError)
			}
			if got := string(tt.err.JSON()); got != tt.wantJSON {
				t.Errorf("JSON() = %s, want %s", got, tt.wantJSON)
			}
		})
	}
}

func TestAsError(t *testing.T) {
	e := &Error{Status: 400, Message: "x"}
	tests := []struct {
		name string
		err  error
		want *Error
	}{
		{"direct", e, e},
		{"wrapped", fmt.Errorf("routing: %w", e), e},
		{"other", fmt.Errorf("plain"), nil},
		{"nil", nil, nil},
		{"typed nil", (*Error)(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AsError(tt.err)
			if got != tt.want || ok != (tt.want != nil) {
				t.Errorf("AsError(%v) = %v, %v, want %v, %v", tt.err, got, ok, tt.want, tt.want != nil)
			}
		})
	}
}

func TestLongValuesAreCutInMessages(t *testing.T) {
	role := strings.Repeat("é", 100)
	_, err := Parse("POST", chatPath, "", []byte(`{"model":"m","messages":[{"role":"`+role+`","content":"x"}]}`), Limits{})
	e, ok := AsError(err)
	if !ok {
		t.Fatalf("Parse() error = %v, want an *Error", err)
	}
	if strings.Contains(e.Message, role) || !strings.Contains(e.Message, strings.Repeat("é", maxQuoted/2)+"...") {
		t.Errorf("Parse() error message = %q, want the role cut to %d bytes", e.Message, maxQuoted)
	}
}
