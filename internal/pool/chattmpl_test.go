package pool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// chatTemplatePool is one pool whose chats render through a tokenizer
// config's template that refuses a first message other than the user's.
func chatTemplatePool(t *testing.T, setting string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"bos_token": {"__type": "AddedToken", "content": "<s>"},
	 "added_tokens_decoder": {"1": {"content": "<s>", "special": true}, "2": {"content": "<eot>", "special": true}},
	 "chat_template": "{{ bos_token }}{% for m in messages %}{% if loop.first and m.role != 'user' %}{{ raise_exception('Conversation must start with the user') }}{% endif %}[{{ m.role }}] {{ m.content }}<eot>{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"}`
	path := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if setting == "" {
		setting = path
	}
	return fourInstances + "    chat_template: " + setting + "\n"
}

func TestChatTemplateRendersAndRefuses(t *testing.T) {
	m := startManager(t, parseConfig(t, chatTemplatePool(t, "")), false, Options{})
	p := m.Pools()[0]
	if v := m.metricValues(t)["dualmap_chat_template{pool=default,rendering=model}"]; v != 1 {
		t.Errorf("dualmap_chat_template{rendering=model} = %v, want 1", v)
	}
	r, err := p.Tokenize(chat(t, "hello world!"), Controls{})
	// Cut before <eot>: "<s>[user] hello world!" (22 bytes) and
	// "<eot>[assistant] " (17), 6 + 5 tokens of the byte approximation.
	if err != nil || r.Tokens != 11 {
		t.Errorf("Tokenize() = %+v, %v; want 11 tokens", r, err)
	}
	// The request's controls reach the template: without the generation
	// prompt the last piece is "<eot>" (2 tokens), not "<eot>[assistant] ".
	noGen, err := openai.Parse("POST", "/v1/chat/completions", "application/json",
		[]byte(`{"model":"m","add_generation_prompt":false,"messages":[{"role":"user","content":"hello world!"}]}`), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Tokenize(noGen, Controls{}); err != nil || r.Tokens != 8 {
		t.Errorf("Tokenize(add_generation_prompt: false) = %+v, %v; want 8 tokens", r, err)
	}
	body, err := openai.Parse("POST", "/v1/chat/completions", "application/json",
		[]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Route(context.Background(), body, Controls{}, nopObserver{})
	if !errors.Is(err, ErrTokenize) || !strings.Contains(err.Error(), "Conversation must start with the user") {
		t.Errorf("Route() of a chat the template refuses = %v, want ErrTokenize with the template's message", err)
	}
	if v := m.metricValues(t)["dualmap_chat_template_errors_total{pool=default}"]; v != 1 {
		t.Errorf("dualmap_chat_template_errors_total = %v, want 1", v)
	}
	assertIdle(t, p)
}

func TestChatTemplateBuiltin(t *testing.T) {
	for _, setting := range []string{"builtin", "auto"} {
		m := startManager(t, parseConfig(t, chatTemplatePool(t, setting)), false, Options{})
		if v := m.metricValues(t)["dualmap_chat_template{pool=default,rendering=builtin}"]; v != 1 {
			t.Errorf("%s: dualmap_chat_template{rendering=builtin} = %v, want 1", setting, v)
		}
		// The builtin rendering: "<|user|>\n" + "hello world!" +
		// "<|assistant|>\n", 3 + 3 + 4 tokens of the byte approximation.
		if r, err := m.Pools()[0].Tokenize(chat(t, "hello world!"), Controls{}); err != nil || r.Tokens != 10 {
			t.Errorf("%s: Tokenize() = %+v, %v", setting, r, err)
		}
	}
}

func TestChatTemplateBadTemplateFailsStartup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chat.jinja")
	if err := os.WriteFile(path, []byte("{% for m in messages %}{{ m.content }"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(parseConfig(t, fourInstances+"    chat_template: "+path+"\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "chat.jinja") || !strings.Contains(err.Error(), "chat template") {
		t.Errorf("New() with a template that does not parse = %v, want an error naming the file", err)
	}
}

// What package openai flattens into a message (tools, tool calls, tool
// call ids) reaches the template as the structured values engines pass.
func TestChatTemplateSeesToolsAndCalls(t *testing.T) {
	if openai.RoleTools != tokenize.RoleTools {
		t.Fatalf("openai.RoleTools %q != tokenize.RoleTools %q", openai.RoleTools, tokenize.RoleTools)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "probe.jinja")
	// The template reports what it sees through its exception's message.
	probe := `{{ raise_exception(tools[0].function.name ~ '|' ~ messages[1].tool_calls[0].function.arguments.city ~ '|' ~ messages[1].content ~ '|' ~ messages[2].tool_call_id ~ '|' ~ messages[2].content ~ '|' ~ (messages | length)) }}`
	if err := os.WriteFile(path, []byte(probe), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startManager(t, parseConfig(t, fourInstances+"    chat_template: "+path+"\n"), false, Options{})
	body, err := openai.Parse("POST", "/v1/chat/completions", "application/json", []byte(`{"model":"m",
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"auto",
		"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"18C"}]}`), openai.Limits{MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Pools()[0].Tokenize(body, Controls{})
	if want := "get_weather|Paris|Let me look.|c1|18C|3"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the template saw %v, want %q", err, want)
	}
}
