package openai

import "testing"

func TestParseChat(t *testing.T) {
	img := `{"image_url":{"detail":"low","url":"https://x/cat.png"},"type":"image_url"}`
	tests := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "minimal",
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "hi"}}},
		},
		{
			name: "stream user max_tokens and unknown fields",
			body: `{"model":"llama","stream":true,"user":"u-1","max_tokens":64,"temperature":0.2,"x_ext":{"a":[1,{"b":null}]},
				"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi","name":"bob","cache":true}]}`,
			want: Request{Model: "llama", Stream: true, User: "u-1", MaxTokens: 64,
				Messages: []Message{{"system", "be brief"}, {"user", "hi"}}},
		},
		{
			name: "max_completion_tokens wins over max_tokens",
			body: `{"max_completion_tokens":10,"model":"m","max_tokens":99,"messages":[{"role":"user","content":"x"}]}`,
			want: Request{Model: "m", MaxTokens: 10, Messages: []Message{{"user", "x"}}},
		},
		{
			name: "nulls for optional fields",
			body: `{"model":"m","stream":null,"user":null,"max_tokens":null,"tools":null,"tool_choice":null,
				"messages":[{"role":"user","content":"x","name":null}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "chat template controls",
			body: `{"model":"m","add_generation_prompt":false,"continue_final_message":true,"chat_template_kwargs":{"z":1,"enable_thinking":false},
				"messages":[{"role":"user","content":"x"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}, NoGenerationPrompt: true, ContinueFinalMessage: true,
				TemplateKwargs: `{"enable_thinking":false,"z":1}`},
		},
		{
			name: "chat template controls: defaults, and values left to the engine",
			body: `{"model":"m","add_generation_prompt":true,"continue_final_message":"yes","chat_template_kwargs":[1],
				"messages":[{"role":"user","content":"x"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "chat template controls: null and non-boolean add_generation_prompt keep the default",
			body: `{"model":"m","add_generation_prompt":null,"chat_template_kwargs":null,"messages":[{"role":"user","content":"x"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "all roles",
			body: `{"model":"m","messages":[{"role":"developer","content":"d"},{"role":"system","content":"s"},
				{"role":"user","content":"u"},{"role":"assistant","content":"a"},{"role":"tool","content":"t","tool_call_id":"c1"},
				{"role":"function","name":"f","content":null}]}`,
			want: Request{Model: "m", Messages: []Message{{"developer", "d"}, {"system", "s"}, {"user", "u"},
				{"assistant", "a"}, {"tool", "t\n<tool_call_id>c1"}, {"function", ""}}},
		},
		{
			name: "escapes decoded",
			body: `{"model":"m","messages":[{"role":"user","content":"caf\u00e9 \"q\" \\ \/ \b\f\n\r\t \ud83d\ude00 \ud800"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "café \"q\" \\ / \b\f\n\r\t 😀 \uFFFD"}}},
		},
		{
			name: "multi-part text joined with newlines",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"one"},{"text":"two","type":"text"},{"type":"text","text":""}]}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "one\ntwo\n"}}},
		},
		{
			name: "image part becomes marker over canonical JSON",
			body: `{"model":"m","messages":[{"role":"user","content":[
				{"type":"text","text":"what is this?"},
				{ "type" : "image_url", "image_url" : { "url" : "https://x/cat.png", "detail": "low" } }]}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "what is this?\n" + wantMarker("image_url", img)}}},
		},
		{
			name: "audio file and unknown parts become markers",
			body: `{"model":"m","messages":[{"role":"user","content":[
				{"type":"input_audio","input_audio":{"data":"AAA=","format":"wav"}},
				{"type":"file","file":{"file_id":"f-1"}},
				{"type":"video_url","video_url":{"url":"v"},"text":5}]}]}`,
			want: Request{Model: "m", Messages: []Message{{"user",
				wantMarker("input_audio", `{"input_audio":{"data":"AAA=","format":"wav"},"type":"input_audio"}`) + "\n" +
					wantMarker("file", `{"file":{"file_id":"f-1"},"type":"file"}`) + "\n" +
					wantMarker("video_url", `{"text":5,"type":"video_url","video_url":{"url":"v"}}`)}}},
		},
		{
			name: "a non-text part with a text field keeps it in the hash",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","text":"alt","image_url":{"url":"u"}}]}]}`,
			want: Request{Model: "m", Messages: []Message{{"user",
				wantMarker("image_url", `{"image_url":{"url":"u"},"text":"alt","type":"image_url"}`)}}},
		},
		{
			name: "refusal part is its text",
			body: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"refusal","refusal":"I can't."},{"type":"text","text":"ok"}]}]}`,
			want: Request{Model: "m", Messages: []Message{{"assistant", "I can't.\nok"}}},
		},
		{
			name: "responses-style text part names accepted",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"output_text","text":"b"}]}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "a\nb"}}},
		},
		{
			name: "assistant tool calls with null and missing content",
			body: `{"model":"m","messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"sunny"},
				{"role":"assistant","tool_calls":[{"type":"function","id":"c2","function":{"arguments":"{}","name":"w"}}]},
				{"role":"assistant"}]}`,
			want: Request{Model: "m", Messages: []Message{
				{"user", "weather?"},
				{"assistant", `<tool_calls>[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"w"},"id":"c1","type":"function"}]`},
				{"tool", "sunny\n<tool_call_id>c1"},
				{"assistant", `<tool_calls>[{"function":{"arguments":"{}","name":"w"},"id":"c2","type":"function"}]`},
				{"assistant", ""},
			}},
		},
		{
			name: "assistant content and tool calls and legacy function_call",
			body: `{"model":"m","messages":[{"role":"assistant","content":"checking","tool_calls":[],"function_call":{"name":"f","arguments":"{}"}}]}`,
			want: Request{Model: "m", Messages: []Message{{"assistant", "checking\n<tool_calls>[]\n<function_call>{\"arguments\":\"{}\",\"name\":\"f\"}"}}},
		},
		{
			name: "tools hoisted before the first message though sent last",
			body: `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],
				"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`,
			want: Request{Model: "m", Messages: []Message{
				{RoleTools, `[{"function":{"name":"w","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}},"type":"function"}]`},
				{"system", "s"}, {"user", "u"}}},
		},
		{
			name: "tool_choice joins the tools message",
			body: `{"model":"m","tool_choice":{"type":"function","function":{"name":"w"}},"tools":[{"type":"function","function":{"name":"w"}}],
				"messages":[{"role":"user","content":"u"}]}`,
			want: Request{Model: "m", Messages: []Message{
				{RoleTools, `[{"function":{"name":"w"},"type":"function"}]` + "\n" + `<tool_choice>{"function":{"name":"w"},"type":"function"}`},
				{"user", "u"}}},
		},
		{
			name: "empty tools and tool_choice alone add nothing",
			body: `{"model":"m","tools":[],"tool_choice":"none","messages":[{"role":"user","content":"u"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "u"}}},
		},
		{
			name: "duplicate keys: the last wins",
			body: `{"model":"a","messages":[{"role":"user","content":"first"}],"model":"b","messages":[{"role":"user","content":"x","content":"second"}]}`,
			want: Request{Model: "b", Messages: []Message{{"user", "second"}}},
		},
		{
			name: "keys are case-sensitive",
			body: `{"Model":"wrong","model":"m","Messages":5,"messages":[{"Role":"bad","role":"user","content":"x"}],"STREAM":"yes"}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "escaped keys match",
			body: `{"mod\u0065l":"m","messages":[{"r\u006fle":"user","content":"x"}]}`,
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
		{
			name: "whitespace everywhere",
			body: " \n\t{ \"model\" : \"m\" ,\r\n \"messages\" : [ { \"role\" : \"user\" , \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] } ] } \n",
			want: Request{Model: "m", Messages: []Message{{"user", "x"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Kind = KindChat
			checkRequest(t, parseOK(t, chatPath, tt.body), tt.want)
		})
	}
}

func TestImageMarkersDistinguishImages(t *testing.T) {
	body := func(url string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
	}
	a1 := parseOK(t, chatPath, body("data:image/png;base64,AAAA")).Messages[0].Content
	a2 := parseOK(t, chatPath, body("data:image/png;base64,AAAA")).Messages[0].Content
	b := parseOK(t, chatPath, body("data:image/png;base64,AAAB")).Messages[0].Content
	if a1 != a2 {
		t.Errorf("equal images: markers %q and %q, want equal", a1, a2)
	}
	if a1 == b {
		t.Errorf("different images: markers both %q, want different", a1)
	}
}
