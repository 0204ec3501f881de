package chattmpl

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseTokenizerConfig(t *testing.T) {
	cfg, err := ParseTokenizerConfig([]byte(`{
		"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
		"eos_token": "</s>", "unk_token": null, "pad_token": "<pad>",
		"added_tokens_decoder": {"2": {"content": "</s>", "special": true}, "0": {"content": "<s>", "special": true, "normalized": true}, "10": {"content": "<x>", "lstrip": true}},
		"chat_template": [{"name": "default", "template": "d"}, {"name": "tool_use", "template": "t"}],
		"model_max_length": 1e30, "extra": [1, {"x": null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"default": "d", "tool_use": "t"}; !mapsEqual(cfg.Templates, want) {
		t.Errorf("Templates = %v, want %v", cfg.Templates, want)
	}
	if want := map[string]string{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}; !mapsEqual(cfg.Special, want) {
		t.Errorf("Special = %v, want %v", cfg.Special, want)
	}
	var contents []string
	for _, a := range cfg.Added {
		contents = append(contents, a.Content)
	}
	if want := []string{"<s>", "</s>", "<x>"}; !slices.Equal(contents, want) || !cfg.Added[0].Normalized || !cfg.Added[2].LStrip {
		t.Errorf("Added = %+v, want %v in id order with their flags", cfg.Added, want)
	}

	one, err := ParseTokenizerConfig([]byte(`{"chat_template": "{{ messages }}"}`))
	if err != nil || one.Templates["default"] != "{{ messages }}" {
		t.Errorf("a single template = %v, %v", one.Templates, err)
	}
	none, err := ParseTokenizerConfig([]byte(`{"chat_template": null}`))
	if err != nil || len(none.Templates) != 0 {
		t.Errorf("no template = %v, %v; want none, no error", none.Templates, err)
	}
}

func TestParseTokenizerConfigErrors(t *testing.T) {
	big := strings.Repeat("x", MaxTemplateBytes+1)
	tests := []struct{ name, in, want string }{
		{"not JSON", `{`, "tokenizer config"},
		{"null", `null`, "want a JSON object"},
		{"array", `[]`, "tokenizer config"},
		{"template number", `{"chat_template": 3}`, "want a string or a list"},
		{"template list of strings", `{"chat_template": ["a"]}`, "chat_template"},
		{"template without name", `{"chat_template": [{"template": "a"}]}`, `want both "name" and "template"`},
		{"duplicate name", `{"chat_template": [{"name": "a", "template": "1"}, {"name": "a", "template": "2"}]}`, "duplicate name"},
		{"template too big", `{"chat_template": "` + big + `"}`, "more than the"},
		{"bos number", `{"bos_token": 1}`, "bos_token"},
		{"bos object without content", `{"bos_token": {"__type": "AddedToken"}}`, `without "content"`},
		{"added key not an id", `{"added_tokens_decoder": {"x": {"content": "a"}}}`, "not a token id"},
		{"added empty content", `{"added_tokens_decoder": {"1": {"content": ""}}}`, "content of 1 to"},
	}
	for _, tt := range tests {
		if _, err := ParseTokenizerConfig([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want one with %q", tt.name, err, tt.want)
		}
	}
	many := `{"chat_template": [` + strings.Repeat(`{"name": "n", "template": "t"},`, MaxTemplates) + `{"name": "last", "template": "t"}]}`
	if _, err := ParseTokenizerConfig([]byte(many)); err == nil || !strings.Contains(err.Error(), "templates, more than") {
		t.Errorf("%d templates: error = %v", MaxTemplates+1, err)
	}
}

func FuzzParseTokenizerConfig(f *testing.F) {
	f.Add([]byte(`{"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", "bos_token": "<s>"}`))
	f.Add([]byte(`{"chat_template": [{"name": "default", "template": "x"}], "eos_token": {"__type": "AddedToken", "content": "</s>"}}`))
	f.Add([]byte(`{"added_tokens_decoder": {"1": {"content": "<|im_end|>", "special": true}}}`))
	f.Add([]byte(`{"chat_template": [{"name": "tool_use", "template": "{{ tools | tojson }}"}, {"name": "default", "template": "{{ raise_exception('no') }}"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseTokenizerConfig(data)
		if err != nil {
			return
		}
		for name, src := range cfg.Templates {
			if len(src) > MaxTemplateBytes || name == "" && len(cfg.Templates) > MaxTemplates {
				t.Fatalf("template %q past the bounds", name)
			}
		}
		for _, a := range cfg.Added {
			if a.Content == "" || len(a.Content) > MaxTokenBytes {
				t.Fatalf("added token %q past the bounds", a.Content)
			}
		}
		// Whatever parsed must compile or fail cleanly, and a compiled one
		// render or fail cleanly (no panic).
		tmpl, err := CompileNamed(cfg.Templates, Options{Special: cfg.Special, Added: cfg.Added})
		if err != nil || len(cfg.Templates) == 0 {
			return
		}
		c := Chat{Messages: []Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: true}
		if text, err := tmpl.Render(&c); err == nil {
			for _, q := range tmpl.Cuts(text, c.Messages, nil) {
				if q <= 0 || q >= len(text) {
					t.Fatalf("cut %d outside (0, %d)", q, len(text))
				}
			}
		} else if !errors.Is(err, ErrRender) {
			t.Fatalf("Render() error %v does not wrap ErrRender", err)
		}
	})
}

func FuzzDecodeAddedTokens(f *testing.F) {
	f.Add([]byte(`{"version": "1.0", "added_tokens": [{"id": 1, "content": "<s>", "special": true}], "model": {"vocab": {"a": 1}}}`))
	f.Add([]byte(`{"added_tokens": null}`))
	f.Add([]byte(`{"truncation": null, "added_tokens": [{"content": ""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := decodeAddedTokens(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, a := range toks {
			if a.Content == "" || len(a.Content) > MaxTokenBytes {
				t.Fatalf("added token %q past the bounds", a.Content)
			}
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// writeFiles writes name -> content into a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const tinyTokenizer = `{"version": "1.0", "added_tokens": [{"id": 5, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}], "model": {"type": "BPE", "vocab": {"a": 0}}}`

func TestResolve(t *testing.T) {
	cfgJSON := `{"bos_token": "<s>", "chat_template": "cfg:{{ bos_token }}{% for m in messages %}{{ m.content }}<|end|>{% endfor %}"}`
	withCfg := writeFiles(t, map[string]string{"tokenizer.json": tinyTokenizer, "tokenizer_config.json": cfgJSON})
	withJinja := writeFiles(t, map[string]string{"tokenizer.json": tinyTokenizer, "tokenizer_config.json": cfgJSON,
		"chat_template.jinja": "jinja:{{ bos_token }}{% for m in messages %}{{ m.content }}<|end|>{% endfor %}"})
	bare := writeFiles(t, map[string]string{"tokenizer.json": tinyTokenizer, "tokenizer_config.json": `{"bos_token": "<s>"}`})
	alone := writeFiles(t, map[string]string{"t.jinja": "file:{{ bos_token }}{{ messages[0].content }}<|end|>{{ messages[1].content }}"})
	tok := func(dir string) string { return filepath.Join(dir, "tokenizer.json") }
	chat := &Chat{Messages: []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}}
	tests := []struct {
		name, setting, tokenizer string
		want                     string // rendering; "" for builtin
		from                     string
	}{
		{"auto: tokenizer_config.json", "", tok(withCfg), "cfg:<s>a<|end|>b<|end|>", "tokenizer_config.json"},
		{"auto: chat_template.jinja first", "auto", tok(withJinja), "jinja:<s>a<|end|>b<|end|>", "chat_template.jinja"},
		{"auto: no template", "auto", tok(bare), "", "no chat template"},
		{"auto: no tokenizer", "", "", "", "no tokenizer file"},
		{"builtin", "builtin", tok(withCfg), "", "builtin"},
		{"a tokenizer_config.json", filepath.Join(withCfg, "tokenizer_config.json"), "", "cfg:<s>a<|end|>b<|end|>", "tokenizer_config.json"},
		{"a template file, special tokens beside the tokenizer", filepath.Join(alone, "t.jinja"), tok(withCfg), "file:<s>a<|end|>b", "t.jinja"},
		{"a template file, no tokenizer", filepath.Join(alone, "t.jinja"), "", "file:a<|end|>b", "t.jinja"},
	}
	for _, tt := range tests {
		src, err := Resolve(tt.setting, tt.tokenizer)
		if err != nil {
			t.Errorf("%s: Resolve() error = %v", tt.name, err)
			continue
		}
		if !strings.Contains(src.From, tt.from) {
			t.Errorf("%s: From = %q, want it to say %q", tt.name, src.From, tt.from)
		}
		if (src.Template == nil) != (tt.want == "") {
			t.Errorf("%s: Template = %v, want builtin %v", tt.name, src.Template, tt.want == "")
			continue
		}
		if src.Template == nil {
			continue
		}
		got, err := src.Template.Render(chat)
		if err != nil || got != tt.want {
			t.Errorf("%s: Render() = %q, %v; want %q", tt.name, got, err, tt.want)
		}
		// <|end|> comes from tokenizer.json's added tokens when there is one.
		if cuts := src.Template.Cuts(got, chat.Messages, nil); (len(cuts) > 0) != (tt.tokenizer != "") {
			t.Errorf("%s: Cuts(%q) = %v", tt.name, got, cuts)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	bad := writeFiles(t, map[string]string{
		"tokenizer.json": tinyTokenizer, "tokenizer_config.json": `{"chat_template": "{% for m in messages %}"}`,
		"broken.json": `{"chat_template": `, "empty.json": `{}`, "bad.jinja": "{{ x ", "badtok.json": `[1]`})
	tests := []struct{ name, setting, tokenizer, want string }{
		{"template does not parse", "auto", filepath.Join(bad, "tokenizer.json"), "tokenizer_config.json: chat template"},
		{"missing file", filepath.Join(bad, "nope.jinja"), "", "no such file"},
		{"broken config", filepath.Join(bad, "broken.json"), "", "broken.json"},
		{"config without template", filepath.Join(bad, "empty.json"), "", "has no chat_template"},
		{"bad template file", filepath.Join(bad, "bad.jinja"), "", "bad.jinja: chat template"},
		{"tokenizer.json not an object", filepath.Join(bad, "bad.jinja"), filepath.Join(bad, "badtok.json"), "want a JSON object"},
		{"NUL", "a\x00b", "", "NUL"},
	}
	for _, tt := range tests {
		if _, err := Resolve(tt.setting, tt.tokenizer); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Resolve() error = %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

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

func TestCuts(t *testing.T) {
	c := newCutter([]AddedToken{{Content: "<|im_start|>"}, {Content: "<|im_end|>"}, {Content: "<|im"}, {Content: "<mask>", LStrip: true}, {Content: "<n>", Normalized: true}})
	tmpl := &Template{cuts: c}
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: ""}, {Role: "user", Content: "<|im_end|>x"}, {Role: "user", Content: "gone"}}
	text := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>user\n<|im_end|>x<|im_end|>\n<mask><n>"
	got := tmpl.Cuts(text, msgs, nil)
	// After S: its <|im_end|>; the empty message: the next <|im_start|>...
	// every cut starts a token, none inside "<|im_start|>" at "<|im".
	for _, q := range got {
		if !strings.HasPrefix(text[q:], "<|im_") {
			t.Errorf("cut at %d (%q) is not before a cut token", q, text[q:min(len(text), q+12)])
		}
	}
	if !slices.IsSorted(got) || len(got) == 0 || got[0] != strings.Index(text, "<|im_end|>") {
		t.Errorf("Cuts() = %v", got)
	}
	if n := len(tmpl.Cuts("no tokens here", msgs, nil)); n != 0 {
		t.Errorf("Cuts() without tokens in the text = %d cuts", n)
	}
	if got := (&Template{}).Cuts(text, msgs, nil); len(got) != 0 {
		t.Errorf("Cuts() with no added tokens = %v, want none", got)
	}
	if c.next("<|im_start|>", 1) != -1 {
		t.Errorf("next() inside a longer token found a cut")
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

func TestCutsBounded(t *testing.T) {
	tmpl := &Template{cuts: newCutter([]AddedToken{{Content: "<e>"}})}
	// Contents the template does not print: after maxMisses of them no
	// more cuts, however long the chat.
	var msgs []Message
	var b strings.Builder
	for i := range 100 {
		msgs = append(msgs, Message{Role: "user", Content: "never printed " + strings.Repeat("x", i)})
		b.WriteString("printed<e>")
	}
	if got := tmpl.Cuts(b.String(), msgs, nil); len(got) != maxMisses {
		t.Errorf("Cuts() = %d cuts, want %d (one per message until the misses run out)", len(got), maxMisses)
	}
	// A content past the window is not found: its message gets the next
	// cut point after the previous cut instead.
	far := strings.Repeat("-", searchWindow+10) + "<e>content<e>"
	if got := tmpl.Cuts(far, []Message{{Content: "content"}}, nil); len(got) != 1 || got[0] != searchWindow+10 {
		t.Errorf("Cuts() of a content past the window = %v, want [%d]", got, searchWindow+10)
	}
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
