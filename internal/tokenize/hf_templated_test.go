//go:build tokenizers && cgo

package tokenize

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dualmap/dualmap/internal/chattmpl"
)

// TestHFTemplatedExact checks that encoding the rendering piece by piece,
// cut before added tokens, gives exactly the tokens of the whole text, as
// the engine encodes it, for a real tokenizer and its own added tokens.
func TestHFTemplatedExact(t *testing.T) {
	enc := openLlama(t)
	added, err := chattmpl.ReadAddedTokens(llamaFile(t))
	if err != nil || len(added) < 200 {
		t.Fatalf("ReadAddedTokens() = %d tokens, %v; want Llama 3's 256", len(added), err)
	}
	p := headerPrompter(t, enc, added, Config{BlockSize: 16})
	shapes := map[string][]Message{
		"prose":   chat(7, 400, 3),
		"unicode": {{Role: "system", Content: "  Réponds en français. 日本語  "}, {Role: "user", Content: "🙂 مرحبا\n\n  naïve café\u0301"}},
		"empty":   {{Role: "user", Content: ""}, {Role: "assistant", Content: ""}, {Role: "user", Content: " "}},
		"special": {{Role: "user", Content: "a<|eot_id|>b <|start_header_id|>"}},
	}
	for name, msgs := range shapes {
		cm := make([]chattmpl.Message, len(msgs))
		for i, m := range msgs {
			cm[i] = unflatten(&m)
		}
		text, err := p.tmpl.Render(&chattmpl.Chat{Messages: cm, AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		whole := enc.Encode(text, nil)
		for round := range 2 { // the second from the cache
			var got Prompt
			if err := p.Messages(msgs, &got); err != nil {
				t.Fatal(err)
			}
			if want := Blocks(whole, 16, nil); got.Tokens != len(whole) || !slices.Equal(got.Blocks, want) {
				t.Errorf("%s, round %d: %d tokens, blocks equal %v; want the whole text's %d tokens", name, round, got.Tokens, slices.Equal(got.Blocks, want), len(whole))
			}
		}
	}
}

// TestHFLlama3ConfigExact does the same with Llama 3's own chat template
// and special tokens, from its tokenizer_config.json.
func TestHFLlama3ConfigExact(t *testing.T) {
	enc := openLlama(t)
	tok := llamaFile(t)
	src, err := chattmpl.Resolve(filepath.Join(filepath.Dir(tok), "meta-llama-3-8b-instruct", "tokenizer_config.json"), tok)
	if err != nil || src.Template == nil {
		t.Fatalf("Resolve() = %+v, %v", src, err)
	}
	p := newPrompter(t, enc, Config{BlockSize: 16, Template: src.Template})
	turns := chat(9, 250, 11)
	var prev Prompt
	for n := 1; n <= len(turns); n += 2 {
		msgs := turns[:n]
		cm := make([]chattmpl.Message, len(msgs))
		for i := range msgs {
			cm[i] = unflatten(&msgs[i])
		}
		text, err := src.Template.Render(&chattmpl.Chat{Messages: cm, AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(text, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n") {
			t.Fatalf("rendering starts %q", text[:60])
		}
		whole := enc.Encode(text, nil)
		var got Prompt
		if err := p.Messages(msgs, &got); err != nil {
			t.Fatal(err)
		}
		if got.Tokens != len(whole) || !slices.Equal(got.Blocks, Blocks(whole, 16, nil)) {
			t.Errorf("%d messages: %d tokens, want the whole text's %d", n, got.Tokens, len(whole))
		}
		if n > 1 && sharedBlocks(prev.Blocks, got.Blocks) < len(prev.Blocks)-2 {
			t.Errorf("%d messages: shares %d of the previous turn's %d blocks", n, sharedBlocks(prev.Blocks, got.Blocks), len(prev.Blocks))
		}
		prev = got
	}
	if st := p.Stats(); st.Hits == 0 {
		t.Errorf("no cache hits over a growing chat: %+v", st)
	}
}
