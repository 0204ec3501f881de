package trace

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func reqs(rs ...Request) *Trace { return &Trace{Requests: rs, BlockSize: 128} }

func blocksOf(t *Trace) [][]uint64 {
	var out [][]uint64
	for _, r := range t.Requests {
		out = append(out, r.Blocks)
	}
	return out
}

func TestReblock(t *testing.T) {
	tests := []struct {
		name     string
		in       *Trace
		from     float64
		size     int
		want     [][]uint64
		wantSize int
	}{
		{
			// 128-token blocks (a 512-token trace scaled by 0.25) into 512.
			name: "four into one",
			in: reqs(
				Request{InputTokens: 600, Blocks: []uint64{10, 11, 12, 13, 14}},     // 512 + 88
				Request{InputTokens: 600, Blocks: []uint64{10, 11, 12, 13, 19}},     // same first block
				Request{InputTokens: 300, Blocks: []uint64{10, 11, 12}},             // first block cut short: another id
				Request{InputTokens: 600, Blocks: []uint64{10, 11, 12, 13, 14}},     // a repeat
				Request{InputTokens: 700, Blocks: []uint64{10, 11, 12, 13, 14, 15}}, // 512 + 188
				Request{InputTokens: 600, Blocks: []uint64{10, 21, 22, 23, 24}},     // shares 128 tokens only: lost
			),
			from: 128, size: 512,
			want:     [][]uint64{{0, 1}, {0, 2}, {3}, {0, 1}, {0, 4}, {5, 6}},
			wantSize: 512,
		},
		{
			// A prompt longer than its blocks goes on with derived text
			// (package replay): blocks past the listed ones are keyed by
			// their parent alone, so equal listed blocks give equal ids.
			name: "derived tail",
			in: reqs(
				Request{InputTokens: 1100, Blocks: []uint64{7, 8}},
				Request{InputTokens: 1100, Blocks: []uint64{7, 8}},
				Request{InputTokens: 1100, Blocks: []uint64{7, 9}},
			),
			from: 128, size: 512,
			want:     [][]uint64{{0, 1, 2}, {0, 1, 2}, {3, 4, 5}},
			wantSize: 512,
		},
		{
			// Fractional source blocks (512 × 0.1 tokens): a new block
			// overlaps every old block it touches.
			name: "fractional",
			in: reqs(
				Request{InputTokens: 120, Blocks: []uint64{1, 2, 3}},
				Request{InputTokens: 120, Blocks: []uint64{1, 2, 4}},
			),
			from: 51.25, size: 100,
			// Block 0 is [0,100): old 0 and 1 (ends at 102.5); block 1 is
			// [100,120): old 1 and 2.
			want:     [][]uint64{{0, 1}, {0, 2}},
			wantSize: 100,
		},
		{
			// Same size: the structure is kept, ids renumbered.
			name: "same size",
			in: reqs(
				Request{InputTokens: 256, Blocks: []uint64{40, 41}},
				Request{InputTokens: 256, Blocks: []uint64{40, 42}},
			),
			from: 128, size: 128,
			want:     [][]uint64{{0, 1}, {0, 2}},
			wantSize: 128,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.Reblock(tt.from, tt.size); err != nil {
				t.Fatalf("Reblock(%v, %d) error = %v", tt.from, tt.size, err)
			}
			if got := blocksOf(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Reblock(%v, %d) blocks = %v, want %v", tt.from, tt.size, got, tt.want)
			}
			if tt.in.BlockSize != tt.wantSize {
				t.Errorf("BlockSize = %d, want %d", tt.in.BlockSize, tt.wantSize)
			}
		})
	}
}

func TestReblockInvalid(t *testing.T) {
	for _, c := range []struct {
		from float64
		size int
	}{{128, 0}, {128, -1}, {0, 512}, {-1, 512}, {math.NaN(), 512}, {math.Inf(1), 512}} {
		tr := reqs(Request{InputTokens: 10, Blocks: []uint64{5}})
		err := tr.Reblock(c.from, c.size)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Reblock(%v, %d) error = %v, want %v", c.from, c.size, err, ErrInvalidArgument)
		}
		if tr.Requests[0].Blocks[0] != 5 || tr.BlockSize != 128 {
			t.Errorf("Reblock(%v, %d) failed but changed the trace", c.from, c.size)
		}
	}
}

// sharedTokens returns, per request, how many leading tokens it shares with
// some earlier request, reading blocks of size tokens (chained ids: a block
// id seen before means its whole prefix was seen).
func sharedTokens(tr *Trace, size float64) []float64 {
	seen := map[uint64]bool{}
	out := make([]float64, len(tr.Requests))
	for i, r := range tr.Requests {
		k := 0
		for k < len(r.Blocks) && seen[r.Blocks[k]] {
			k++
		}
		out[i] = math.Min(float64(r.InputTokens), float64(k)*size)
		for _, b := range r.Blocks {
			seen[b] = true
		}
	}
	return out
}

// TestReblockConversation checks the properties another client relies on,
// on the real conversation trace scaled as `make bench-peer` scales it
// (a quarter of the tokens: 128-token blocks), re-cut into 512-token blocks:
// one block per 512 tokens, each id of one length, ids chained, and no
// request sharing more than it did (reuse finer than 512 tokens is lost,
// none is invented). It logs how much reuse is lost.
func TestReblockConversation(t *testing.T) {
	tr, err := ReadFile(conversationPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Requests {
		r := &tr.Requests[i]
		r.InputTokens = max(1, int(math.Round(float64(r.InputTokens)*0.25)))
	}
	before := sharedTokens(tr, 128)
	if err := tr.Reblock(128, 512); err != nil {
		t.Fatal(err)
	}
	after := sharedTokens(tr, 512)
	lengths := map[uint64]int{}
	parents := map[uint64]uint64{}
	var sumBefore, sumAfter, total float64
	for i, r := range tr.Requests {
		if want := (r.InputTokens + 511) / 512; len(r.Blocks) != want {
			t.Fatalf("request %d: %d blocks for %d tokens, want %d", i, len(r.Blocks), r.InputTokens, want)
		}
		for j, b := range r.Blocks {
			n := min(512, r.InputTokens-j*512)
			if l, ok := lengths[b]; ok && l != n {
				t.Fatalf("request %d: block id %d has %d tokens here and %d before", i, b, n, l)
			}
			lengths[b] = n
			parent := uint64(math.MaxUint64)
			if j > 0 {
				parent = r.Blocks[j-1]
			}
			if p, ok := parents[b]; ok && p != parent {
				t.Fatalf("request %d: block id %d follows %d here and %d before", i, b, parent, p)
			}
			parents[b] = parent
		}
		if after[i] > before[i] {
			t.Fatalf("request %d shares %v tokens after Reblock, %v before", i, after[i], before[i])
		}
		sumBefore += before[i]
		sumAfter += after[i]
		total += float64(r.InputTokens)
	}
	if sumAfter == 0 {
		t.Fatal("no reuse left")
	}
	t.Logf("reusable prompt tokens: %.2f%% in 128-token blocks, %.2f%% in 512-token blocks", 100*sumBefore/total, 100*sumAfter/total)
}
