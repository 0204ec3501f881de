package openai

import "testing"

func TestParseCompletion(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "string prompt",
			body: `{"model":"m","prompt":"Once upon a time","max_tokens":16,"stream":true,"user":"u"}`,
			want: Request{Model: "m", Prompts: []string{"Once upon a time"}, MaxTokens: 16, Stream: true, User: "u"},
		},
		{
			name: "array of strings",
			body: `{"model":"m","prompt":["a","b\nc"]}`,
			want: Request{Model: "m", Prompts: []string{"a", "b\nc"}},
		},
		{
			name: "token ids are one prompt of decimal text",
			body: `{"model":"m","prompt":[1, 22 ,333,0,-0]}`,
			want: Request{Model: "m", Prompts: []string{"1 22 333 0 0"}},
		},
		{
			name: "arrays of token ids are one prompt each",
			body: `{"model":"m","prompt":[[1,2],[3],[4,5,6]]}`,
			want: Request{Model: "m", Prompts: []string{"1 2", "3", "4 5 6"}},
		},
		{
			name: "chat-only fields are ignored, whatever their type",
			body: `{"model":"m","prompt":"p","tools":5,"tool_choice":{"x":1},"messages":"no","max_completion_tokens":"x"}`,
			want: Request{Model: "m", Prompts: []string{"p"}},
		},
		{
			name: "echo suffix and logprobs allowed",
			body: `{"model":"m","prompt":"p","suffix":"s","echo":true,"logprobs":5,"n":2}`,
			want: Request{Model: "m", Prompts: []string{"p"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Kind = KindCompletion
			checkRequest(t, parseOK(t, completionPath, tt.body), tt.want)
		})
	}
}
