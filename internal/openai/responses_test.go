package openai

import "testing"

func TestParseResponses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "string input is one user message",
			body: `{"model":"m","input":"hello","stream":true,"max_output_tokens":100,"user":"u"}`,
			want: Request{Model: "m", Stream: true, MaxTokens: 100, User: "u", Messages: []Message{{"user", "hello"}}},
		},
		{
			name: "instructions lead as a system message",
			body: `{"input":"hello","instructions":"be brief","model":"m"}`,
			want: Request{Model: "m", Messages: []Message{{"system", "be brief"}, {"user", "hello"}}},
		},
		{
			name: "empty instructions add nothing",
			body: `{"model":"m","input":"x","instructions":""}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "null instructions add nothing",
			body: `{"model":"m","input":"x","instructions":null,"max_output_tokens":null}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "message items with and without type",
			body: `{"model":"m","input":[
				{"role":"developer","content":"dev"},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://x/a.png"}]},
				{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"a cat","annotations":[]}]},
				{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},
				{"role":"system","content":"sys"}]}`,
			want: Request{Model: "m", Messages: []Message{
				{"developer", "dev"},
				{"user", "look\n" + wantMarker("input_image", `{"image_url":"https://x/a.png","type":"input_image"}`)},
				{"assistant", "a cat"},
				{"assistant", "no"},
				{"system", "sys"},
			}},
		},
		{
			name: "other items are their canonical JSON",
			body: `{"model":"m","input":[
				{"role":"user","content":"weather?"},
				{"type":"function_call","call_id":"c1","name":"w","arguments":"{\"city\":\"Paris\"}"},
				{"call_id":"c1","type":"function_call_output","output":"sunny"},
				{"type":"reasoning","id":"r1","summary":[],"content":[{"type":"reasoning_text","text":"hm"}],"role":42}]}`,
			want: Request{Model: "m", Messages: []Message{
				{"user", "weather?"},
				{"function_call", `{"arguments":"{\"city\":\"Paris\"}","call_id":"c1","name":"w","type":"function_call"}`},
				{"function_call_output", `{"call_id":"c1","output":"sunny","type":"function_call_output"}`},
				{"reasoning", `{"content":[{"text":"hm","type":"reasoning_text"}],"id":"r1","role":42,"summary":[],"type":"reasoning"}`},
			}},
		},
		{
			name: "tools, then instructions, then input",
			body: `{"model":"m","input":"go","instructions":"sys","tools":[{"type":"function","name":"w","parameters":{}}],"tool_choice":"auto"}`,
			want: Request{Model: "m", Messages: []Message{
				{RoleTools, `[{"name":"w","parameters":{},"type":"function"}]` + "\n" + `<tool_choice>"auto"`},
				{"system", "sys"},
				{"user", "go"},
			}},
		},
		{
			name: "chat-only fields are ignored",
			body: `{"model":"m","input":"x","messages":7,"max_tokens":"many","previous_response_id":"resp_1","store":false}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Kind = KindResponses
			checkRequest(t, parseOK(t, responsesPath, tt.body), tt.want)
		})
	}
}
