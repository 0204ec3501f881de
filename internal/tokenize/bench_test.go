package tokenize

import (
	"strconv"
	"testing"
)

// BenchmarkMessagesWarm tokenizes a 20-message, 32 KB chat whose first 19
// messages are cached and whose last one is new at every iteration, as in a
// multi-turn conversation.
func BenchmarkMessagesWarm(b *testing.B) {
	for _, enc := range encoders(b) {
		b.Run(enc.Name(), func(b *testing.B) {
			p := newPrompter(b, enc, Config{})
			msgs := chat(20, 1600, 1)
			last := []byte(msgs[19].Content)
			var dst Prompt
			if err := p.Messages(msgs, &dst); err != nil {
				b.Fatalf("Messages() error = %v", err)
			}
			b.SetBytes(20 * 1600)
			i := 0
			for b.Loop() {
				i++
				copy(last, strconv.Itoa(i)+" ")
				msgs[19].Content = string(last)
				if err := p.Messages(msgs, &dst); err != nil {
					b.Fatalf("Messages() error = %v", err)
				}
			}
			b.ReportMetric(float64(dst.Tokens), "tokens/op")
		})
	}
}

// BenchmarkMessagesWarmTemplate is BenchmarkMessagesWarm with a chat
// template (headerTemplate, Llama 3's layout): the cost per request of
// rendering the whole chat, cutting it and encoding the new piece, against
// the builtin rendering's per-message cache; "cold" has the cache off and
// encodes everything.
func BenchmarkMessagesWarmTemplate(b *testing.B) {
	for _, enc := range encoders(b) {
		for _, mode := range []struct {
			name    string
			entries int
		}{{"warm", 0}, {"cold", -1}} {
			b.Run(enc.Name()+"/"+mode.name, func(b *testing.B) {
				p := headerPrompter(b, enc, headerAdded, Config{CacheEntries: mode.entries})
				msgs := chat(20, 1600, 1)
				last := []byte(msgs[19].Content)
				var dst Prompt
				if err := p.Messages(msgs, &dst); err != nil {
					b.Fatalf("Messages() error = %v", err)
				}
				b.SetBytes(20 * 1600)
				i := 0
				for b.Loop() {
					i++
					copy(last, strconv.Itoa(i)+" ")
					msgs[19].Content = string(last)
					if err := p.Messages(msgs, &dst); err != nil {
						b.Fatalf("Messages() error = %v", err)
					}
				}
				b.ReportMetric(float64(dst.Tokens), "tokens/op")
			})
		}
	}
}

// BenchmarkTextCold400KB tokenizes a 400 KB completion prompt.
func BenchmarkTextCold400KB(b *testing.B) {
	text := englishText(400<<10, 2)
	for _, enc := range encoders(b) {
		b.Run(enc.Name(), func(b *testing.B) {
			p := newPrompter(b, enc, Config{})
			var dst Prompt
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if err := p.Text(text, &dst); err != nil {
					b.Fatalf("Text() error = %v", err)
				}
			}
			b.ReportMetric(float64(dst.Tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkBlocks hashes 100,000 tokens into blocks of 16.
func BenchmarkBlocks(b *testing.B) {
	tokens := seq(100000, 1)
	dst := make([]uint64, 0, len(tokens)/16+1)
	b.SetBytes(int64(4 * len(tokens)))
	for b.Loop() {
		dst = Blocks(tokens, 16, dst)
	}
	b.ReportMetric(float64(len(tokens))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
