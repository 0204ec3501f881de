package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chatBody builds a realistic chat request of about size bytes: a system
// prompt, tool definitions and alternating user and assistant turns whose
// text has the newlines, quotes and non-ASCII that real prompts have (the
// latter escaped as \uXXXX, as Python clients send it).
func chatBody(tb testing.TB, size int) []byte {
	tb.Helper()
	line := `Paragraph %d: the "router" reads this text — naïve café, 東京 — and hashes its prefix.` + "\n"
	text := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, line, i)
		}
		return b.String()
	}
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "Get the weather for a city.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "unit": map[string]any{"enum": []string{"c", "f"}}},
			"required": []string{"city"}},
	}}}
	msgs := []msg{{"system", text(size / 8)}}
	for i := 0; ; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, msg{role, text(size / 24)})
		b, err := json.Marshal(map[string]any{"model": "llama-3-70b", "stream": true, "max_tokens": 512, "tools": tools, "messages": msgs})
		if err != nil {
			tb.Fatal(err)
		}
		// Escape non-ASCII the way Python's json.dumps does by default.
		var out strings.Builder
		for _, c := range string(b) {
			if c < 0x80 {
				out.WriteRune(c)
			} else {
				fmt.Fprintf(&out, `\u%04x`, c)
			}
		}
		if out.Len() >= size {
			return []byte(out.String())
		}
	}
}

func benchmarkParseChat(b *testing.B, size int) {
	body := chatBody(b, size)
	if _, err := Parse("POST", "/v1/chat/completions", "application/json", body, Limits{}); err != nil {
		b.Fatalf("Parse() error = %v", err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("POST", "/v1/chat/completions", "application/json", body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseChat32KB(b *testing.B)  { benchmarkParseChat(b, 32<<10) }
func BenchmarkParseChat400KB(b *testing.B) { benchmarkParseChat(b, 400<<10) }
