package chattmpl

import (
	"slices"
	"strings"
	"testing"
)

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
