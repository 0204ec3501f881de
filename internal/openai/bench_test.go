package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Lines of prompt text for the benchmark bodies. englishLine is typical
// English with a quote now and then; denseLine has the non-ASCII that Python
// clients send as \uXXXX escapes (json.dumps's default) on every line, which
// is the slow case for a JSON reader.
const (
	englishLine = `Step %d: the router reads the request, hashes the prompt prefix and picks an "instance" from the pair of candidates.` + "\n"
	denseLine   = `Paragraph %d: the "router" reads this text — naïve café, 東京 — and hashes its prefix.` + "\n"
)

// chatBody builds a chat request of at least size bytes: a system prompt,
// one tool definition and alternating user and assistant turns made of line,
// encoded with non-ASCII escaped as Python clients do.
func chatBody(tb testing.TB, size int, line string) []byte {
	tb.Helper()
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

func benchmarkParseChat(b *testing.B, size int, line string) {
	body := chatBody(b, size, line)
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

func BenchmarkParseChat32KB(b *testing.B)  { benchmarkParseChat(b, 32<<10, englishLine) }
func BenchmarkParseChat400KB(b *testing.B) { benchmarkParseChat(b, 400<<10, englishLine) }

// BenchmarkParseChat32KBEscaped is the slow case: an escape every dozen bytes.
func BenchmarkParseChat32KBEscaped(b *testing.B) { benchmarkParseChat(b, 32<<10, denseLine) }
