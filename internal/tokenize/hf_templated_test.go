//go:build tokenizers && cgo

package tokenize

import (
	"slices"
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
