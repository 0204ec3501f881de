package tokenize

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// englishText returns about n bytes of deterministic English-like text
// (exactly n bytes, all ASCII), different for each seed.
func englishText(n int, seed uint64) string {
	words := strings.Fields(`the router sends each request to the engine whose
		prefix cache already holds the longest part of its prompt while keeping
		queues short so that time to first token stays low under load and a
		multi turn conversation keeps landing where its history was computed
		model server block hash token scheduler latency throughput request`)
	r := rand.New(rand.NewPCG(seed, 42))
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		w := words[r.IntN(len(words))]
		if r.IntN(12) == 0 {
			b.WriteString(". ")
			w = strings.ToUpper(w[:1]) + w[1:]
		} else if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()[:n]
}

// chat returns n messages alternating user and assistant after a system
// message, each of about size bytes; seed varies the content.
func chat(n, size int, seed uint64) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		role := "user"
		switch {
		case i == 0:
			role = "system"
		case i%2 == 0:
			role = "assistant"
		}
		msgs[i] = Message{Role: role, Content: englishText(size, seed*1000+uint64(i))}
	}
	return msgs
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// encoders returns the encoders under test: Bytes always, plus the real
// tokenizers this build has (see testEncoders in the hf*_test.go files).
func encoders(tb testing.TB) []Encoder {
	return append([]Encoder{Bytes()}, testEncoders(tb)...)
}

func newPrompter(tb testing.TB, enc Encoder, cfg Config) *Prompter {
	tb.Helper()
	p, err := NewPrompter(enc, cfg)
	if err != nil {
		tb.Fatalf("NewPrompter() error = %v", err)
	}
	return p
}

// sharedBlocks returns how many leading values a and b have in common.
func sharedBlocks(a, b []uint64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
