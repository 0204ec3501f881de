package replay

import (
	"strings"
	"testing"
)

func TestVocabulary(t *testing.T) {
	words := strings.Fields(vocabulary)
	seen := map[string]bool{}
	for _, w := range words {
		if seen[w] {
			t.Errorf("vocabulary repeats %q", w)
		}
		seen[w] = true
	}
	if len(words) != 64 {
		t.Errorf("len(vocabulary) = %d words, want 64", len(words))
	}
}

func TestBlock(t *testing.T) {
	p := NewPrompter(1, 512, 1)
	tests := []struct {
		name      string
		a, b      uint64
		seedB     uint64
		wantEqual bool
	}{
		{"same id", 7, 7, 1, true},
		{"different ids", 7, 8, 1, false},
		{"ids 0 and 1", 0, 1, 1, false},
		{"same id, other seed", 7, 7, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := p.Block(tt.a), NewPrompter(tt.seedB, 512, 1).Block(tt.b)
			if len(a) != 2048 || len(b) != 2048 {
				t.Fatalf("len(Block()) = %d, %d, want 2048", len(a), len(b))
			}
			if (a == b) != tt.wantEqual {
				t.Errorf("Block(%d) == Block(%d) is %v, want %v", tt.a, tt.b, a == b, tt.wantEqual)
			}
			firstA, _, _ := strings.Cut(a, " ")
			firstB, _, _ := strings.Cut(b, " ")
			if !tt.wantEqual && firstA == firstB {
				t.Errorf("Block(%d) and Block(%d) share their first word %q", tt.a, tt.b, firstA)
			}
			for i := range len(a) {
				if c := a[i]; c != ' ' && (c < 'a' || c > 'z') {
					t.Fatalf("Block(%d)[%d] = %q, want a lowercase letter or space", tt.a, i, c)
				}
			}
		})
	}
}

func TestPromptSharedPrefix(t *testing.T) {
	p := NewPrompter(3, 16, 1) // 64-byte blocks
	tests := []struct {
		name       string
		a, b       []uint64
		tokA, tokB int
		shared     int  // bytes the prompts must share
		differ     bool // whether they must differ within the tag word after
	}{
		{"two shared blocks", []uint64{1, 2, 3}, []uint64{1, 2, 4}, 48, 48, 128, true},
		{"one shared block", []uint64{1, 2}, []uint64{1, 9, 3}, 32, 48, 64, true},
		{"nothing shared", []uint64{5}, []uint64{6}, 16, 16, 0, true},
		{"equal blocks, shorter prompt", []uint64{1, 2, 3}, []uint64{1, 2, 3}, 48, 40, 160, false},
		{"equal blocks, padded alike", []uint64{1}, []uint64{1}, 40, 40, 160, false},
		{"different blocks, padded", []uint64{1}, []uint64{2}, 40, 40, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := p.Prompt(tt.a, tt.tokA), p.Prompt(tt.b, tt.tokB)
			got := commonPrefix(a, b)
			if got < tt.shared || tt.differ && got >= tt.shared+tagLetters {
				t.Errorf("commonPrefix(Prompt(%v), Prompt(%v)) = %d, want %d (differing by byte %d: %v)",
					tt.a, tt.b, got, tt.shared, tt.shared+tagLetters, tt.differ)
			}
		})
	}
}

func TestPromptLength(t *testing.T) {
	tests := []struct {
		name        string
		blockTokens int
		scale       float64
		blocks      []uint64
		tokens      int
		wantBlock   int
	}{
		{"mooncake", 512, 1, []uint64{1, 2, 3}, 1200, 2048},
		{"exact blocks", 512, 1, []uint64{1, 2}, 1024, 2048},
		{"scaled 0.1", 512, 0.1, []uint64{1, 2, 3}, 120, 205},
		{"scaled 0.01", 512, 0.01, []uint64{1}, 5, 20},
		{"tiny block", 1, 0.01, []uint64{1, 2}, 1, 1},
		{"too few blocks", 16, 1, []uint64{1}, 100, 64},
		{"no blocks", 16, 1, nil, 10, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPrompter(1, tt.blockTokens, tt.scale)
			if got := p.BlockBytes(); got != tt.wantBlock {
				t.Errorf("BlockBytes() = %d, want %d", got, tt.wantBlock)
			}
			got := p.Prompt(tt.blocks, tt.tokens)
			if len(got) != 4*tt.tokens {
				t.Errorf("len(Prompt(%v, %d)) = %d, want %d", tt.blocks, tt.tokens, len(got), 4*tt.tokens)
			}
			if len(tt.blocks) > 0 && !strings.HasPrefix(got, p.Block(tt.blocks[0])[:min(p.BlockBytes(), len(got))]) {
				t.Errorf("Prompt(%v, %d) does not start with Block(%d)", tt.blocks, tt.tokens, tt.blocks[0])
			}
			if again := NewPrompter(1, tt.blockTokens, tt.scale).Prompt(tt.blocks, tt.tokens); again != got {
				t.Errorf("Prompt(%v, %d) differs between two Prompters of the same seed", tt.blocks, tt.tokens)
			}
		})
	}
}

// TestPromptPinned pins a prompt's text, computed before the Prompter moved
// onto package hashing: replayed prompts, and so the blocks the router
// hashes, must not change between versions.
func TestPromptPinned(t *testing.T) {
	const want = "adwyhiskmacbbj ffhctyyhqeszyty wfonfzvaxlrreea f"
	if got := NewPrompter(7, 4, 1).Prompt([]uint64{1, 2}, 12); got != want {
		t.Errorf("Prompt([1 2], 12) = %q, want %q", got, want)
	}
}
