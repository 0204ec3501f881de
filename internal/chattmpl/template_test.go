package chattmpl

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestNamedTemplates(t *testing.T) {
	tmpl, err := CompileNamed(map[string]string{"default": "plain", "tool_use": "tools:{{ tools | length }}"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tmpl.Render(&Chat{}); got != "plain" {
		t.Errorf("without tools = %q, want the default", got)
	}
	if got, _ := tmpl.Render(&Chat{Tools: `[{"a": 1}, {"b": 2}]`}); got != "tools:2" {
		t.Errorf("with tools = %q, want tool_use", got)
	}
	if _, err := CompileNamed(map[string]string{"a": "x", "b": "y"}, Options{}); err == nil || !strings.Contains(err.Error(), `none named "default"`) {
		t.Errorf("two templates without a default: error = %v", err)
	}
	only, err := CompileNamed(map[string]string{"rag": "only"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := only.Render(&Chat{}); got != "only" {
		t.Errorf("a single named template = %q", got)
	}
}

func TestRenderValues(t *testing.T) {
	tmpl, err := Compile(`{{ tools | tojson }}|{% for c in messages[0].tool_calls %}{{ c.function.arguments.city }} {{ c.function.arguments | tojson }}{% endfor %}|{{ messages[1].tool_call_id }}|{{ tools is none }}{{ documents is none }}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(&Chat{
		Tools: `[{"z": 1, "a": [1.5, true, null, "é<&>"]}]`,
		Messages: []Message{
			{Role: "assistant", ToolCalls: `[{"function": {"name": "w", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}}]`},
			{Role: "tool", Content: "18", ToolCallID: "c1"},
		}})
	if want := `[{"z": 1, "a": [1.5, true, null, "é<&>"]}]|Paris {"city": "Paris", "n": 2}|c1|FalseTrue`; err != nil || got != want {
		t.Errorf("Render() = %q, %v\nwant %q", got, err, want)
	}
	for _, bad := range []Chat{{Tools: `{"a": 1}`}, {Tools: `[1`}, {Tools: "[1] 2"}, {Messages: []Message{{Role: "assistant", ToolCalls: `{}`}}}} {
		if _, err := tmpl.Render(&bad); !errors.Is(err, ErrRender) {
			t.Errorf("Render(%+v) error = %v, want ErrRender", bad, err)
		}
	}
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	if _, err := tmpl.Render(&Chat{Tools: deep}); !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deeply nested tools: error = %v", err)
	}
}

// FuzzRender renders any message text and tools through a template that
// uses what chat templates use (loop, namespace, trim, tojson, slicing,
// raise_exception); it must render or fail with ErrRender, never panic,
// and cut only before added tokens.
func FuzzRender(f *testing.F) {
	tmpl, err := Compile(`{%- set ns = namespace(sys='') -%}
{%- if messages[0].role == 'system' %}{% set ns.sys = messages[0].content | trim %}{% set msgs = messages[1:] %}{% else %}{% set msgs = messages %}{% endif -%}
{{ bos_token }}{% if ns.sys %}<|im_start|>system
{{ ns.sys }}{% if tools %}{% for t in tools %}
{{ t | tojson }}{% endfor %}{% endif %}<|im_end|>
{% endif %}
{%- for m in msgs %}{% if m.role not in ['user', 'assistant', 'tool'] %}{{ raise_exception('bad role ' ~ m.role) }}{% endif -%}
<|im_start|>{{ m.role }}
{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool>{{ c | tojson }}</tool>{% endfor %}{% endif %}{% if loop.last and m.role == 'user' %} ({{ loop.length }}){% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`, Options{Special: map[string]string{"bos_token": "<s>"}, Added: []AddedToken{{Content: "<|im_start|>"}, {Content: "<|im_end|>"}, {Content: "<s>"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("system", " sys ", "user", "hi <|im_end|>", "", `[{"type": "function"}]`)
	f.Add("user", "", "assistant", "", `[{"function": {"arguments": "{\"a\": [1, {}]}"}}]`, "")
	f.Add("critic", "x", "user", "\xff\x00", "[", "[1")
	f.Fuzz(func(t *testing.T, r1, c1, r2, c2, calls, tools string) {
		c := Chat{Messages: []Message{{Role: r1, Content: c1}, {Role: r2, Content: c2, ToolCalls: calls}}, Tools: tools, AddGenerationPrompt: true}
		text, err := tmpl.Render(&c)
		if err != nil {
			if !errors.Is(err, ErrRender) {
				t.Fatalf("Render() error %v does not wrap ErrRender", err)
			}
			return
		}
		last := 0
		for _, q := range tmpl.Cuts(text, c.Messages, nil) {
			if q <= last || q >= len(text) || !(strings.HasPrefix(text[q:], "<|im_") || strings.HasPrefix(text[q:], "<s>")) {
				t.Fatalf("cut %d of %q is not before an added token, after %d", q, text, last)
			}
			last = q
		}
	})
}

// One Template serves every request of a pool at once.
func TestRenderConcurrent(t *testing.T) {
	tmpl, err := Compile(`{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ bos_token }}{{ m.content | trim }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}{% endfor %}{{ ns.n }}{{ tools | tojson }}`,
		Options{Special: map[string]string{"bos_token": "<s>"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				content := strings.Repeat("x", g+i%7)
				c := Chat{Tools: `[{"n": 1}]`, Messages: []Message{{Role: "user", Content: " " + content + " "}, {Role: "assistant", ToolCalls: `[{"function": {"arguments": "{\"a\": 1}"}}]`}}}
				got, err := tmpl.Render(&c)
				want := `<s>` + content + `<s>[{"function": {"arguments": {"a": 1}}}]2[{"n": 1}]`
				if err != nil || got != want {
					t.Errorf("Render() = %q, %v; want %q", got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
