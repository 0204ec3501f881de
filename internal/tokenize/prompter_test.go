package tokenize

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNewPrompterConfig(t *testing.T) {
	tests := []struct {
		name    string
		enc     Encoder
		cfg     Config
		wantErr string
		wantBS  int
	}{
		{"defaults", Bytes(), Config{}, "", DefaultBlockSize},
		{"block size", Bytes(), Config{BlockSize: 32}, "", 32},
		{"cache disabled", Bytes(), Config{CacheEntries: -1}, "", DefaultBlockSize},
		{"nil encoder", nil, Config{}, "tokenize: NewPrompter: nil Encoder", 0},
		{"negative block size", Bytes(), Config{BlockSize: -1}, "tokenize: NewPrompter: negative BlockSize -1", 0},
		{"negative cache tokens", Bytes(), Config{CacheTokens: -1}, "tokenize: NewPrompter: negative CacheTokens -1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPrompter(tt.enc, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("NewPrompter() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPrompter() error = %v, want nil", err)
			}
			if got := p.BlockSize(); got != tt.wantBS {
				t.Errorf("BlockSize() = %d, want %d", got, tt.wantBS)
			}
		})
	}
}

func TestPrompterEmpty(t *testing.T) {
	p := newPrompter(t, Bytes(), Config{})
	tests := []struct {
		name string
		run  func(*Prompt) error
	}{
		{"nil messages", func(d *Prompt) error { return p.Messages(nil, d) }},
		{"no messages", func(d *Prompt) error { return p.Messages([]Message{}, d) }},
		{"empty text", func(d *Prompt) error { return p.Text("", d) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := Prompt{Tokens: 5, Blocks: []uint64{1, 2}}
			if err := tt.run(&dst); err != nil {
				t.Fatalf("error = %v, want nil", err)
			}
			if dst.Tokens != 0 || len(dst.Blocks) != 0 {
				t.Errorf("Prompt = %+v, want Tokens 0 and no blocks", dst)
			}
		})
	}
	if err := p.Messages(nil, nil); err == nil || !strings.HasPrefix(err.Error(), "tokenize: ") {
		t.Errorf("Messages(nil, nil) error = %v, want a tokenize: error", err)
	}
	if err := p.Text("x", nil); err == nil || !strings.HasPrefix(err.Error(), "tokenize: ") {
		t.Errorf("Text(x, nil) error = %v, want a tokenize: error", err)
	}
}

// TestMessagesRendering checks the template approximation with the byte
// encoder: marker and content of each message, then the assistant marker.
func TestMessagesRendering(t *testing.T) {
	p := newPrompter(t, Bytes(), Config{BlockSize: 4})
	enc := Bytes()
	tests := []struct {
		name string
		msgs []Message
	}{
		{"one user message", []Message{{"user", "Hello, world!"}}},
		{"empty content", []Message{{"user", ""}}},
		{"uncommon role", []Message{{"critic", "no"}, {"user", "yes"}}},
		{"chat", chat(5, 37, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []uint32
			for _, m := range tt.msgs {
				want = enc.Encode("<|"+m.Role+"|>\n", want)
				want = enc.Encode(m.Content, want)
			}
			want = enc.Encode("<|assistant|>\n", want)
			for pass := range 2 { // the second pass hits the cache
				var got Prompt
				if err := p.Messages(tt.msgs, &got); err != nil {
					t.Fatalf("Messages() error = %v", err)
				}
				if got.Tokens != len(want) {
					t.Errorf("pass %d: Tokens = %d, want %d", pass, got.Tokens, len(want))
				}
				if wb := Blocks(want, 4, nil); !slices.Equal(got.Blocks, wb) {
					t.Errorf("pass %d: Blocks = %#x, want %#x", pass, got.Blocks, wb)
				}
			}
		})
	}
}

// TestMessagesMultiTurn plays a conversation turn by turn, as clients send
// it: each turn repeats the history and adds the assistant's reply and a new
// user message.
func TestMessagesMultiTurn(t *testing.T) {
	for _, enc := range encoders(t) {
		t.Run(enc.Name(), func(t *testing.T) {
			p := newPrompter(t, enc, Config{})
			full := chat(21, 300, 7) // system, then user/assistant pairs
			var prev Prompt
			var wantHits uint64
			for n := 2; n <= len(full); n += 2 {
				var cur Prompt
				if err := p.Messages(full[:n], &cur); err != nil {
					t.Fatalf("Messages() error = %v", err)
				}
				if len(cur.Blocks) != ceilDiv(cur.Tokens, DefaultBlockSize) {
					t.Fatalf("len(Blocks) = %d, want ceil(%d/%d)", len(cur.Blocks), cur.Tokens, DefaultBlockSize)
				}
				if n > 2 {
					wantHits += uint64(n - 2)
					// The previous turn's tokens are a prefix of this turn's.
					if got, want := sharedBlocks(prev.Blocks, cur.Blocks), prev.Tokens/DefaultBlockSize; got < want {
						t.Errorf("turn %d shares %d leading blocks with the previous turn, want >= %d", n/2, got, want)
					}
				}
				prev = cur
			}
			s := p.Stats()
			if s.Hits != wantHits || s.Misses != uint64(len(full)-1) {
				t.Errorf("Stats() = %+v, want Hits %d, Misses %d", s, wantHits, len(full)-1)
			}
			if s.Entries != len(full)-1 {
				t.Errorf("Stats().Entries = %d, want %d", s.Entries, len(full)-1)
			}
		})
	}
}

func TestMessagesCacheBounds(t *testing.T) {
	full := chat(40, 200, 9)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"entries", Config{CacheEntries: 5}},
		{"tokens", Config{CacheTokens: 300}},
		{"disabled", Config{CacheEntries: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPrompter(t, Bytes(), tt.cfg)
			ref := newPrompter(t, Bytes(), Config{CacheEntries: -1})
			for i := range full {
				var got, want Prompt
				if err := p.Messages(full[:i+1], &got); err != nil {
					t.Fatalf("Messages() error = %v", err)
				}
				if err := ref.Messages(full[:i+1], &want); err != nil {
					t.Fatalf("Messages() error = %v", err)
				}
				if got.Tokens != want.Tokens || !slices.Equal(got.Blocks, want.Blocks) {
					t.Fatalf("Messages(%d msgs) differs from the uncached result", i+1)
				}
				s := p.Stats()
				if tt.cfg.CacheEntries > 0 && s.Entries > tt.cfg.CacheEntries {
					t.Errorf("Stats().Entries = %d, want <= %d", s.Entries, tt.cfg.CacheEntries)
				}
				if tt.cfg.CacheTokens > 0 && s.Tokens > tt.cfg.CacheTokens {
					t.Errorf("Stats().Tokens = %d, want <= %d", s.Tokens, tt.cfg.CacheTokens)
				}
				if tt.cfg.CacheEntries < 0 && (s.Entries != 0 || s.Hits != 0) {
					t.Errorf("Stats() = %+v, want no entries and no hits", s)
				}
			}
		})
	}
}

// TestPrompterConcurrent runs overlapping chats from many goroutines on a
// small cache (so entries are evicted while others read them) and compares
// each result with an uncached Prompter's. Run with -race.
func TestPrompterConcurrent(t *testing.T) {
	for _, enc := range encoders(t) {
		t.Run(enc.Name(), func(t *testing.T) {
			p := newPrompter(t, enc, Config{CacheEntries: 8, CacheTokens: 2000})
			ref := newPrompter(t, enc, Config{CacheEntries: -1})
			chats := [][]Message{chat(12, 150, 1), chat(12, 150, 2), chat(6, 900, 3)}
			want := make([][]Prompt, len(chats))
			for c, msgs := range chats {
				for n := 1; n <= len(msgs); n++ {
					var w Prompt
					if err := ref.Messages(msgs[:n], &w); err != nil {
						t.Fatalf("Messages() error = %v", err)
					}
					want[c] = append(want[c], w)
				}
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					var got Prompt // reused: Blocks' storage is recycled
					for i := range 60 {
						c := (g + i) % len(chats)
						n := 1 + (g*7+i)%len(chats[c])
						if err := p.Messages(chats[c][:n], &got); err != nil {
							t.Errorf("Messages() error = %v", err)
							return
						}
						w := want[c][n-1]
						if got.Tokens != w.Tokens || !slices.Equal(got.Blocks, w.Blocks) {
							t.Errorf("goroutine %d: chat %d, %d msgs: got %d tokens, want %d (or blocks differ)", g, c, n, got.Tokens, w.Tokens)
							return
						}
						if i%10 == 0 {
							var tp Prompt
							if err := p.Text(chats[c][0].Content, &tp); err != nil {
								t.Errorf("Text() error = %v", err)
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func TestTextSharedPrefix(t *testing.T) {
	for _, enc := range encoders(t) {
		t.Run(enc.Name(), func(t *testing.T) {
			p := newPrompter(t, enc, Config{})
			prefix := englishText(4000, 11)
			var a, b Prompt
			if err := p.Text(prefix+" First question about routing?", &a); err != nil {
				t.Fatalf("Text() error = %v", err)
			}
			if err := p.Text(prefix+" Another, unrelated question.", &b); err != nil {
				t.Fatalf("Text() error = %v", err)
			}
			for _, pr := range []Prompt{a, b} {
				if len(pr.Blocks) != ceilDiv(pr.Tokens, DefaultBlockSize) {
					t.Errorf("len(Blocks) = %d, want ceil(%d/%d)", len(pr.Blocks), pr.Tokens, DefaultBlockSize)
				}
			}
			// All but the last block or so of the prefix's tokens are shared.
			prefixTokens := len(enc.Encode(prefix, nil))
			if got, want := sharedBlocks(a.Blocks, b.Blocks), prefixTokens/DefaultBlockSize-1; got < want {
				t.Errorf("shared leading blocks = %d, want >= %d", got, want)
			}
			if a.Blocks[len(a.Blocks)-1] == b.Blocks[len(b.Blocks)-1] {
				t.Error("last blocks are equal, want different values for different endings")
			}
			if s := p.Stats(); s.Hits+s.Misses != 0 {
				t.Errorf("Stats() = %+v after Text only, want no cache lookups", s)
			}
		})
	}
}

func TestTextBytesCounts(t *testing.T) {
	p := newPrompter(t, Bytes(), Config{})
	tests := []struct {
		text       string
		wantTokens int
	}{
		{"a", 1},
		{strings.Repeat("x", 4000), 1000},
		{englishText(4000, 5), 1000},
		{strings.Repeat("y", 65), 17},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d bytes", len(tt.text)), func(t *testing.T) {
			var got Prompt
			if err := p.Text(tt.text, &got); err != nil {
				t.Fatalf("Text() error = %v", err)
			}
			if got.Tokens != tt.wantTokens || len(got.Blocks) != ceilDiv(tt.wantTokens, 16) {
				t.Errorf("Text() = %d tokens, %d blocks, want %d, %d", got.Tokens, len(got.Blocks), tt.wantTokens, ceilDiv(tt.wantTokens, 16))
			}
		})
	}
}
