package openai

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestCanon(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`null`, `null`},
		{` true `, `true`},
		{`-1.5e+10`, `-1.5e+10`},
		{`"a\u0041\/\"\\\n\u0001\u001f é"`, `"aA/\"\\\n\u0001\u001f é"`},
		{`"\u2028"`, "\"\u2028\""},
		{`[ 1 , [ ] , { } ]`, `[1,[],{}]`},
		{`{"b":1,"a":{"d":[{"z":0,"y":1}],"c":"x"}}`, `{"a":{"c":"x","d":[{"y":1,"z":0}]},"b":1}`},
		{`{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"B":1,"a":2,"":3}`, `{"":3,"B":1,"a":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r := reader{data: []byte(tt.in)}
			got, err := r.canon(nil)
			if err == nil {
				err = r.end()
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("canon(%s) = %s, %v, want %s, nil", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestDeterminism checks that requests that differ only in formatting, key
// order and string escaping give identical Messages.
func TestDeterminism(t *testing.T) {
	tests := []struct {
		name, path string
		bodies     []string
	}{
		{
			name: "chat tools, tool calls and images",
			path: chatPath,
			bodies: []string{
				`{"model":"m","tools":[{"type":"function","function":{"name":"w","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
				"tool_choice":{"type":"function","function":{"name":"w"}},
				"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"u","detail":"high"}}]},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":"{}"}}]}]}`,

				`{
				  "messages": [
				    {"content": [{"text": "hi", "type": "text"}, {"image_url": {"detail": "high", "url": "u"}, "type": "image_url"}], "role": "user"},
				    {"tool_calls": [{"function": {"arguments": "{}", "name": "w"}, "type": "function", "id": "c"}], "role": "assistant", "content": null}
				  ],
				  "tool_choice": {"function": {"name": "w"}, "type": "function"},
				  "tools": [ { "function": { "parameters": { "required": [ "city" ], "properties": { "city": { "type": "string" } }, "type": "object" },
				                             "description": "\u0057eather", "name": "w" }, "type": "function" } ],
				  "model": "m"
				}`,
			},
		},
		{
			name: "responses items",
			path: responsesPath,
			bodies: []string{
				`{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"w","arguments":"{}"},{"type":"message","role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
				`{"input":[{"arguments":"{}","name":"w","call_id":"c1","type":"function_call"},{"content":[{"image_url":"x","type":"input_image"}],"role":"user","type":"message"}],"model":"m"}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := parseOK(t, tt.path, tt.bodies[0]).Messages
			for _, b := range tt.bodies[1:] {
				if got := parseOK(t, tt.path, b).Messages; !reflect.DeepEqual(got, first) {
					t.Errorf("Parse().Messages = %q, want %q (as for the first body)", got, first)
				}
			}
		})
	}
}

func TestMarker(t *testing.T) {
	tests := []struct {
		typ, part string
	}{
		{"image_url", `{"image_url":{"url":"a"},"type":"image_url"}`},
		{"file", ``},
		{"x", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			if got, want := marker(tt.typ, []byte(tt.part)), wantMarker(tt.typ, tt.part); got != want {
				t.Errorf("marker(%q, %s) = %q, want %q", tt.typ, tt.part, got, want)
			}
		})
	}
}

// TestCanonLinearInDepth checks that canonicalizing a deeply nested value
// does not copy its inner values once per level: the bytes allocated stay a
// small multiple of the input.
func TestCanonLinearInDepth(t *testing.T) {
	const depth = maxDepth - 1
	inner := `"` + strings.Repeat("x", 1<<20) + `"`
	doc := []byte(strings.Repeat(`{"a":`, depth) + inner + strings.Repeat(`}`, depth))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := reader{data: doc}
	got, err := r.canon(nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != len(doc) {
		t.Fatalf("canon() = %d bytes, %v, want %d bytes, nil", len(got), err, len(doc))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*uint64(len(doc)) {
		t.Errorf("canon() allocated %d bytes for a %d-byte input, want at most 8x", alloc, len(doc))
	}
}
