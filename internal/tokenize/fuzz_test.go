package tokenize

import (
	"slices"
	"testing"
)

// FuzzMessages checks, for every encoder of the build, that Messages does
// not panic, that len(Blocks) == ceil(Tokens/BlockSize), that a repeat (from
// the cache) gives the same prompt, and that a chat's leading messages give
// leading blocks of the longer chat.
func FuzzMessages(f *testing.F) {
	f.Add("user", "Hello, world!", "assistant", "Hi there.", uint8(16))
	f.Add("", "", "", "", uint8(1))
	f.Add("system", "\xff\xfe\x00bad utf-8", "tool", "{\"a\":1}", uint8(3))
	f.Add("critic", englishText(300, 1), "user", "é\u2028\x00", uint8(0))
	encs := encoders(f)
	f.Fuzz(func(t *testing.T, role1, content1, role2, content2 string, size uint8) {
		bs := int(size%64) + 1
		msgs := []Message{{role1, content1}, {role2, content2}}
		for _, enc := range encs {
			p := newPrompter(t, enc, Config{BlockSize: bs, CacheEntries: 4})
			var one, two, again Prompt
			for _, c := range []struct {
				msgs []Message
				dst  *Prompt
			}{{msgs[:1], &one}, {msgs, &two}, {msgs, &again}} {
				if err := p.Messages(c.msgs, c.dst); err != nil {
					t.Fatalf("%s: Messages() error = %v", enc.Name(), err)
				}
				if len(c.dst.Blocks) != ceilDiv(c.dst.Tokens, bs) {
					t.Fatalf("%s: len(Blocks) = %d, want ceil(%d/%d)", enc.Name(), len(c.dst.Blocks), c.dst.Tokens, bs)
				}
			}
			if two.Tokens != again.Tokens || !slices.Equal(two.Blocks, again.Blocks) {
				t.Errorf("%s: Messages() from the cache = %+v, want %+v", enc.Name(), again, two)
			}
			if two.Tokens < one.Tokens {
				t.Errorf("%s: two messages give %d tokens, fewer than the first alone (%d)", enc.Name(), two.Tokens, one.Tokens)
			}
		}
	})
}

// FuzzText checks, for every encoder of the build, that Text does not panic
// and that len(Blocks) == ceil(Tokens/BlockSize); for the byte encoder also
// that Tokens == ceil(len(text)/4) and that hashing in pieces agrees.
func FuzzText(f *testing.F) {
	f.Add("Hello, world!", uint8(16), uint16(3))
	f.Add("", uint8(0), uint16(0))
	f.Add("\xff\x00\xc3", uint8(2), uint16(1))
	f.Add(englishText(1000, 2), uint8(15), uint16(999))
	encs := encoders(f)
	f.Fuzz(func(t *testing.T, text string, size uint8, cut uint16) {
		bs := int(size%64) + 1
		for _, enc := range encs {
			p := newPrompter(t, enc, Config{BlockSize: bs})
			var got Prompt
			if err := p.Text(text, &got); err != nil {
				t.Fatalf("%s: Text() error = %v", enc.Name(), err)
			}
			if len(got.Blocks) != ceilDiv(got.Tokens, bs) {
				t.Fatalf("%s: len(Blocks) = %d, want ceil(%d/%d)", enc.Name(), len(got.Blocks), got.Tokens, bs)
			}
			if enc.Name() != "bytes" {
				continue
			}
			if want := ceilDiv(len(text), 4); got.Tokens != want {
				t.Errorf("bytes: Tokens = %d, want %d", got.Tokens, want)
			}
			toks := enc.Encode(text, nil)
			k := int(cut) % (len(toks) + 1)
			c := newChain(bs, nil)
			c.write(toks[:k])
			c.write(toks[k:])
			if pieces := c.finish(); !slices.Equal(pieces, got.Blocks) {
				t.Errorf("bytes: hashing cut at %d = %#x, want %#x", k, pieces, got.Blocks)
			}
		}
	})
}
