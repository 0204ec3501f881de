package chattmpl

import (
	"errors"
	"slices"
	"strings"
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
