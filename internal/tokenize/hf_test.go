//go:build tokenizers && cgo

package tokenize

import (
	"slices"
	"testing"
)

func TestHFEncode(t *testing.T) {
	enc := openLlama(t)
	if got, want := enc.Name(), "Meta-Llama-3-8B-Instruct.json"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	tests := []struct {
		name     string
		text     string
		min, max int
	}{
		{"empty", "", 0, 0},
		{"hello world", "Hello, world!", 3, 6}, // Hello , world ! in Llama 3
		{"invalid UTF-8", "ab\xff\xfecd", 1, 8},
		{"NUL bytes", "one\x00two\x00\x00three", 3, 6},
		{"4000 bytes of English", englishText(4000, 1), 700, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := enc.Encode(tt.text, nil)
			if len(got) < tt.min || len(got) > tt.max {
				t.Errorf("len(Encode(%.40q)) = %d, want in [%d, %d]", tt.text, len(got), tt.min, tt.max)
			}
		})
	}
}

func TestHFEncodeAppends(t *testing.T) {
	enc := openLlama(t)
	whole := enc.Encode("Hello, world!", nil)
	got := enc.Encode("Hello, world!", []uint32{1, 2})
	if want := append([]uint32{1, 2}, whole...); !slices.Equal(got, want) {
		t.Errorf("Encode(_, [1 2]) = %v, want %v", got, want)
	}
}

// prose is ordinary English, unlike englishText's few common words.
const prose = `When a request arrives, the router has to decide quickly which of its
model servers should handle it. The choice matters because each server keeps
the attention state of recently processed prompts in GPU memory, and a prompt
that begins with text the server has already seen can skip much of the
expensive prefill computation. Multi-turn conversations are the clearest
example: every new turn repeats the whole history, so sending it back to the
server that handled the previous turn saves most of the work. On the other
hand, piling every conversation onto a few popular servers makes their queues
grow, and the time to first token suffers. A good scheduler therefore weighs
the expected cache savings against the current load, using estimates of how
many tokens each request carries and how long each server will take to reach
it. None of this requires exact token ids; approximate counts, computed in a
few microseconds, are usually enough to make sensible decisions.`

// TestHFBytesApproximation checks that the byte approximation's counts are
// in the range of a real tokenizer's on English prose.
func TestHFBytesApproximation(t *testing.T) {
	enc := openLlama(t)
	hf, by := len(enc.Encode(prose, nil)), len(Bytes().Encode(prose, nil))
	if ratio := float64(by) / float64(hf); ratio < 0.75 || ratio > 1.35 {
		t.Errorf("bytes/HF token count = %d/%d = %.2f, want within [0.75, 1.35]", by, hf, ratio)
	}
	t.Logf("%d bytes of English prose: %d Llama 3 tokens, %d byte tokens", len(prose), hf, by)
}

func TestHFClose(t *testing.T) {
	enc, err := Open(llamaFile(t))
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := enc.Close(); err != nil {
		t.Errorf("second Close() error = %v, want nil", err)
	}
	if got := enc.Encode("hello", nil); len(got) != 0 {
		t.Errorf("Encode() after Close = %v, want nothing", got)
	}
}

func TestHFOpenMissing(t *testing.T) {
	if _, err := Open("/nonexistent/tokenizer.json"); err == nil {
		t.Error("Open(missing file) error = nil, want an error")
	}
}

// TestHFMessagesCache checks that tokenizing a long chat a second time
// costs no tokenization: every message comes from the cache.
func TestHFMessagesCache(t *testing.T) {
	p := newPrompter(t, openLlama(t), Config{})
	msgs := chat(20, 1600, 5) // about 32 KB
	var first, second Prompt
	if err := p.Messages(msgs, &first); err != nil {
		t.Fatalf("Messages() error = %v", err)
	}
	after1 := p.Stats()
	if err := p.Messages(msgs, &second); err != nil {
		t.Fatalf("Messages() error = %v", err)
	}
	after2 := p.Stats()
	if after1.Misses != 20 || after1.Hits != 0 {
		t.Errorf("Stats() after the first call = %+v, want 20 misses, 0 hits", after1)
	}
	if after2.Misses != 20 || after2.Hits != 20 {
		t.Errorf("Stats() after the second call = %+v, want 20 misses, 20 hits", after2)
	}
	if first.Tokens != second.Tokens || !slices.Equal(first.Blocks, second.Blocks) {
		t.Error("second Messages() differs from the first")
	}
	if first.Tokens < 5000 || first.Tokens > 10000 {
		t.Errorf("Tokens = %d for a 32 KB chat, want in [5000, 10000]", first.Tokens)
	}
	// The next turn adds a reply and a question: one more miss each, and
	// every full block of this turn is shared.
	next := append(slices.Clone(msgs), Message{"assistant", "Sure."}, Message{"user", "And then?"})
	var third Prompt
	if err := p.Messages(next, &third); err != nil {
		t.Fatalf("Messages() error = %v", err)
	}
	if s := p.Stats(); s.Misses != 22 || s.Hits != 40 {
		t.Errorf("Stats() after the next turn = %+v, want 22 misses, 40 hits", s)
	}
	if got, want := sharedBlocks(first.Blocks, third.Blocks), first.Tokens/DefaultBlockSize; got < want {
		t.Errorf("next turn shares %d leading blocks, want >= %d", got, want)
	}
}
