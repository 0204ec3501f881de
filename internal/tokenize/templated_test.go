package tokenize

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/chattmpl"
)

// headerTemplate is a small template in the style of Llama 3's: headers and
// ends of turn are added tokens, the content is trimmed.
const headerTemplate = `{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function.name }}({{ c.function.arguments | tojson }})</call>{% endfor %}{% endif %}<|eot_id|>{% endfor %}{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`

// headerAdded are headerTemplate's added tokens, as a tokenizer lists them.
var headerAdded = []chattmpl.AddedToken{
	{Content: "<|begin_of_text|>", Special: true},
	{Content: "<|start_header_id|>", Special: true},
	{Content: "<|end_header_id|>", Special: true},
	{Content: "<|eot_id|>", Special: true},
}

func headerPrompter(t testing.TB, enc Encoder, added []chattmpl.AddedToken, cfg Config) *Prompter {
	t.Helper()
	tmpl, err := chattmpl.Compile(headerTemplate, chattmpl.Options{
		Special: map[string]string{"bos_token": "<|begin_of_text|>"}, Added: added})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Template = tmpl
	return newPrompter(t, enc, cfg)
}

func TestTemplatedMatchesWholeText(t *testing.T) {
	msgs := chat(5, 300, 7)
	tmpl, err := chattmpl.Compile(headerTemplate, chattmpl.Options{Special: map[string]string{"bos_token": "<|begin_of_text|>"}, Added: headerAdded})
	if err != nil {
		t.Fatal(err)
	}
	cm := make([]chattmpl.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chattmpl.Message{Role: m.Role, Content: m.Content}
	}
	text, err := tmpl.Render(&chattmpl.Chat{Messages: cm, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n") ||
		!strings.HasSuffix(text, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n") {
		t.Fatalf("rendering = %q...%q", text[:80], text[len(text)-60:])
	}
	if cuts := tmpl.Cuts(text, cm, nil); len(cuts) != len(msgs) {
		t.Errorf("Cuts() = %v, want one per message (%d)", cuts, len(msgs))
	}
	p := headerPrompter(t, Bytes(), headerAdded, Config{BlockSize: 16})
	var got Prompt
	if err := p.Messages(msgs, &got); err != nil {
		t.Fatal(err)
	}
	// Bytes pads each piece's last token, so compare with the pieces' sum;
	// with a real tokenizer (TestHFTemplatedExact) the whole text's tokens.
	if want := len(Bytes().Encode(text, nil)); got.Tokens < want || got.Tokens > want+len(msgs) {
		t.Errorf("Tokens = %d, want the whole text's %d plus at most one per piece", got.Tokens, want)
	}
}

func TestTemplatedCachesPieces(t *testing.T) {
	p := headerPrompter(t, Bytes(), headerAdded, Config{BlockSize: 4})
	turn1 := chat(3, 200, 1)
	var one, two Prompt
	if err := p.Messages(turn1, &one); err != nil {
		t.Fatal(err)
	}
	s1 := p.Stats()
	if s1.Hits != 0 || s1.Misses != 4 { // one piece per message, and the generation prompt's
		t.Errorf("first turn: %+v, want 4 misses", s1)
	}
	turn2 := append(slices.Clone(turn1), Message{Role: "assistant", Content: "Sure."}, Message{Role: "user", Content: "And then?"})
	if err := p.Messages(turn2, &two); err != nil {
		t.Fatal(err)
	}
	s2 := p.Stats()
	// The first turn's three message pieces, and its last piece (end of
	// turn and generation prompt), which ends the second turn too.
	if hits := s2.Hits - s1.Hits; hits != 4 {
		t.Errorf("second turn: %d hits, want 4", hits)
	}
	if n := sharedBlocks(one.Blocks, two.Blocks); n < len(one.Blocks)-3 {
		t.Errorf("second turn shares %d of the first turn's %d blocks", n, len(one.Blocks))
	}
	var again Prompt
	if err := p.Messages(turn2, &again); err != nil || !slices.Equal(again.Blocks, two.Blocks) || again.Tokens != two.Tokens {
		t.Errorf("the same chat again: %v, %d tokens, blocks equal %v", err, again.Tokens, slices.Equal(again.Blocks, two.Blocks))
	}
}

func TestTemplatedTools(t *testing.T) {
	p := headerPrompter(t, Bytes(), headerAdded, Config{CacheEntries: -1})
	tools := `[{"function":{"name":"f"},"type":"function"}]`
	calls := `[{"function":{"arguments":"{\"x\": 1}","name":"f"},"id":"c1","type":"function"}]`
	with := []Message{
		{Role: RoleTools, Content: tools + "\n<tool_choice>\"auto\""},
		{Role: "user", Content: "go"},
		{Role: "assistant", Content: "<tool_calls>" + calls},
		{Role: "tool", Content: "42\n<tool_call_id>c1"},
	}
	without := []Message{{Role: "user", Content: "go"}, {Role: "assistant", Content: ""}, {Role: "tool", Content: "42"}}
	var a, b Prompt
	if err := p.Messages(with, &a); err != nil {
		t.Fatal(err)
	}
	if err := p.Messages(without, &b); err != nil {
		t.Fatal(err)
	}
	// The rendering adds <call>f({"x": 1})</call> and <tools>...</tools>
	// and drops the flattened lines.
	extra := len(Bytes().Encode(`<call>f({"x": 1})</call><tools>`+tools+`</tools>`, nil))
	if d := a.Tokens - b.Tokens; d < extra-3 || d > extra+3 {
		t.Errorf("tools and a call add %d tokens, want about %d", d, extra)
	}
}

func TestTemplatedRenderError(t *testing.T) {
	tmpl, err := chattmpl.Compile(`{% if messages[0].role != 'user' %}{{ raise_exception('first message must be the user') }}{% endif %}{{ messages[0].content }}`, chattmpl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPrompter(t, Bytes(), Config{Template: tmpl})
	var got Prompt
	err = p.Messages([]Message{{Role: "system", Content: "x"}}, &got)
	if !errors.Is(err, chattmpl.ErrRender) || !strings.Contains(err.Error(), "first message must be the user") {
		t.Errorf("Messages() error = %v, want chattmpl.ErrRender with the template's message", err)
	}
	if err := p.Messages([]Message{{Role: "user", Content: "hi"}}, &got); err != nil || got.Tokens != 1 {
		t.Errorf("Messages() = %d tokens, %v; want 1, nil", got.Tokens, err)
	}
}

func TestUnflatten(t *testing.T) {
	tests := []struct {
		in   Message
		want chattmpl.Message
	}{
		{Message{Role: "assistant", Content: "hi\n<tool_calls>[1]"}, chattmpl.Message{Role: "assistant", Content: "hi", ToolCalls: "[1]"}},
		{Message{Role: "assistant", Content: "<tool_calls>[1]"}, chattmpl.Message{Role: "assistant", ToolCalls: "[1]"}},
		{Message{Role: "assistant", Content: "a<tool_calls>[1]"}, chattmpl.Message{Role: "assistant", Content: "a<tool_calls>[1]"}},
		{Message{Role: "user", Content: "x\n<tool_calls>[1]"}, chattmpl.Message{Role: "user", Content: "x\n<tool_calls>[1]"}},
		{Message{Role: "tool", Content: "42\n<tool_call_id>c1"}, chattmpl.Message{Role: "tool", Content: "42", ToolCallID: "c1"}},
		{Message{Role: "tool", Content: "<tool_call_id>c1\nmore"}, chattmpl.Message{Role: "tool", Content: "<tool_call_id>c1\nmore"}},
	}
	for _, tt := range tests {
		if got := unflatten(&tt.in); got != tt.want {
			t.Errorf("unflatten(%q) = %+v, want %+v", tt.in.Content, got, tt.want)
		}
	}
}

// FuzzMessagesTemplated: with a chat template, any chat gives the same
// prompt from the cache as without it, and again the same.
func FuzzMessagesTemplated(f *testing.F) {
	f.Add("system", " a ", "assistant", "x\n<tool_calls>[{\"function\": {\"arguments\": \"{}\"}}]")
	f.Add("tool", "1\n<tool_call_id>c", "user", "<|eot_id|>")
	f.Add("tools", "[{\"a\": 1}]\n<tool_choice>\"auto\"", "user", "\xff")
	cached := headerPrompter(f, Bytes(), headerAdded, Config{CacheEntries: 8})
	plain := headerPrompter(f, Bytes(), headerAdded, Config{CacheEntries: -1})
	f.Fuzz(func(t *testing.T, r1, c1, r2, c2 string) {
		msgs := []Message{{Role: r1, Content: c1}, {Role: r2, Content: c2}}
		var a, b, again Prompt
		errA := cached.Messages(msgs, &a)
		errB := plain.Messages(msgs, &b)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("errors differ: %v, %v", errA, errB)
		}
		if errA != nil {
			if !errors.Is(errA, chattmpl.ErrRender) {
				t.Fatalf("error %v does not wrap ErrRender", errA)
			}
			return
		}
		if err := cached.Messages(msgs, &again); err != nil {
			t.Fatal(err)
		}
		if a.Tokens != b.Tokens || !slices.Equal(a.Blocks, b.Blocks) || !slices.Equal(a.Blocks, again.Blocks) {
			t.Fatalf("prompts differ: %d/%d/%d tokens", a.Tokens, b.Tokens, again.Tokens)
		}
	})
}

func TestChatOptions(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "Write a haiku."}, {Role: "assistant", Content: "Autumn moon"}}
	builtin := newPrompter(t, Bytes(), Config{})
	var with, without, cont Prompt
	if err := builtin.Chat(msgs, ChatOptions{}, &with); err != nil {
		t.Fatal(err)
	}
	if err := builtin.Chat(msgs, ChatOptions{NoGenerationPrompt: true}, &without); err != nil {
		t.Fatal(err)
	}
	if err := builtin.Chat(msgs, ChatOptions{ContinueFinalMessage: true, NoGenerationPrompt: true}, &cont); err != nil {
		t.Fatal(err)
	}
	if gen := len(Bytes().Encode("<|assistant|>\n", nil)); with.Tokens-without.Tokens != gen || cont.Tokens != without.Tokens {
		t.Errorf("builtin: %d tokens with the generation prompt, %d without, %d continuing; want a difference of %d, then equal", with.Tokens, without.Tokens, cont.Tokens, gen)
	}

	tmpl, err := chattmpl.Compile(`{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{% endfor %}`+
		`{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>{% if enable_thinking is defined and not enable_thinking %}<nothink>{% endif %}{% endif %}`,
		chattmpl.Options{Added: headerAdded})
	if err != nil {
		t.Fatal(err)
	}
	p := newPrompter(t, Bytes(), Config{Template: tmpl, CacheEntries: -1})
	tokens := func(opt ChatOptions) int {
		t.Helper()
		var got Prompt
		if err := p.Chat(msgs, opt, &got); err != nil {
			t.Fatalf("Chat(%+v) error = %v", opt, err)
		}
		return got.Tokens
	}
	// Pieces: "<|start_header_id|>user<|end_header_id|>Write a haiku." (54
	// bytes), "<|eot_id|><|start_header_id|>assistant<|end_header_id|>Autumn moon"
	// (66) and "<|eot_id|>" (10) or, continuing, nothing past the content.
	if got := tokens(ChatOptions{NoGenerationPrompt: true}); got != 14+17+3 {
		t.Errorf("no generation prompt: %d tokens, want 34", got)
	}
	if got := tokens(ChatOptions{NoGenerationPrompt: true, ContinueFinalMessage: true}); got != 14+17 {
		t.Errorf("continue final message: %d tokens, want 31", got)
	}
	plain, nothink := tokens(ChatOptions{}), tokens(ChatOptions{TemplateKwargs: `{"enable_thinking": false}`})
	if nothink-plain != 2 { // "<nothink>" adds 9 bytes to the last piece
		t.Errorf("enable_thinking false: %d tokens, %d without; want 2 more", nothink, plain)
	}
	var got Prompt
	if err := p.Chat(msgs, ChatOptions{ContinueFinalMessage: true}, &got); !errors.Is(err, chattmpl.ErrRender) {
		t.Errorf("continue_final_message with the generation prompt: error = %v, want ErrRender (vLLM refuses both)", err)
	}
	if err := p.Chat(msgs, ChatOptions{TemplateKwargs: `[1]`}, &got); !errors.Is(err, chattmpl.ErrRender) {
		t.Errorf("kwargs not an object: error = %v, want ErrRender", err)
	}
}
