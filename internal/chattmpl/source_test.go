package chattmpl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
