package tokenize

import (
	"fmt"
	"slices"
	"testing"
)

func seq(n int, start uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = start + uint32(i)
	}
	return s
}

func TestBlocksLength(t *testing.T) {
	tests := []struct {
		tokens, size, want int
	}{
		{0, 16, 0}, {1, 16, 1}, {15, 16, 1}, {16, 16, 1}, {17, 16, 2},
		{100, 16, 7}, {5, 1, 5}, {7, 3, 3}, {6, 3, 2},
	}
	for _, tt := range tests {
		got := Blocks(seq(tt.tokens, 1), tt.size, nil)
		if len(got) != tt.want {
			t.Errorf("len(Blocks(%d tokens, %d)) = %d, want %d", tt.tokens, tt.size, len(got), tt.want)
		}
	}
}

// TestBlocksGolden pins the hash: the router and the simulated model server
// must compute the same values, in every process and on every platform. The
// values were checked against an independent implementation (Python).
func TestBlocksGolden(t *testing.T) {
	tests := []struct {
		name   string
		tokens []uint32
		size   int
		want   []uint64
	}{
		{"one token", []uint32{1}, 16, []uint64{0xa3c38fe24b3da3d2}},
		{"two blocks and a partial", seq(35, 100), 16, []uint64{0x95e70091db7bef7d, 0x6b6965ca3745fdd2, 0x808643d08fb4cf19}},
		{"odd block size", seq(7, 0), 3, []uint64{0x31eca08f9f51ec2b, 0xbbb3b8b3d1f57e36, 0x3eed73c50cfb4400}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Blocks(tt.tokens, tt.size, nil); !slices.Equal(got, tt.want) {
				t.Errorf("Blocks() = %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestBlocksChaining(t *testing.T) {
	const size = 16
	base := seq(100, 1000) // 6 full blocks and a partial one of 4
	want := Blocks(base, size, nil)
	for _, k := range []int{0, 1, 3, 6} {
		t.Run(fmt.Sprintf("change in block %d", k), func(t *testing.T) {
			changed := slices.Clone(base)
			changed[k*size+1]++
			got := Blocks(changed, size, nil)
			for i := range got {
				if same := got[i] == want[i]; same != (i < k) {
					t.Errorf("block %d: equal = %v, want %v", i, same, i < k)
				}
			}
		})
	}
	t.Run("equal prefixes", func(t *testing.T) {
		other := append(slices.Clone(base[:64]), seq(50, 7)...)
		got := Blocks(other, size, nil)
		if n := sharedBlocks(got, want); n != 4 {
			t.Errorf("shared leading blocks = %d, want 4", n)
		}
	})
	t.Run("partial last block", func(t *testing.T) {
		longer := Blocks(append(slices.Clone(base), 5), size, nil)
		if n := sharedBlocks(longer, want); n != len(want)-1 {
			t.Errorf("shared leading blocks = %d, want %d", n, len(want)-1)
		}
	})
	t.Run("zero padding is not a token", func(t *testing.T) {
		a := Blocks([]uint32{9}, size, nil)
		b := Blocks([]uint32{9, 0}, size, nil)
		if a[0] == b[0] {
			t.Errorf("Blocks([9]) = Blocks([9 0]) = %#x, want different values", a[0])
		}
	})
	t.Run("parent matters", func(t *testing.T) {
		a := Blocks(append(seq(16, 1), seq(16, 50)...), size, nil)
		b := Blocks(append(seq(16, 2), seq(16, 50)...), size, nil)
		if a[1] == b[1] {
			t.Errorf("block 1 = %#x for both, want different values after different block 0", a[1])
		}
	})
}

// TestChainPieces checks that hashing tokens written in pieces, as
// Prompter.Messages does, gives the values of Blocks on the whole.
func TestChainPieces(t *testing.T) {
	tokens := seq(203, 77)
	for _, size := range []int{1, 2, 5, 16, 64, 300} {
		want := Blocks(tokens, size, nil)
		for _, cuts := range [][]int{{0}, {1}, {15, 16, 17}, {3, 4, 5, 6, 100, 101}, {200}} {
			c := newChain(size, nil)
			prev := 0
			for _, cut := range cuts {
				c.write(tokens[prev:cut])
				prev = cut
			}
			c.write(tokens[prev:])
			if got := c.finish(); !slices.Equal(got, want) {
				t.Errorf("size %d, cuts %v: chain = %#x, want %#x", size, cuts, got, want)
			}
		}
	}
}

func TestBlocksReusesDst(t *testing.T) {
	tokens := seq(1000, 3)
	dst := make([]uint64, 5, 100)
	allocs := testing.AllocsPerRun(100, func() {
		dst = Blocks(tokens, 16, dst)
	})
	if allocs != 0 {
		t.Errorf("Blocks() allocations = %v, want 0", allocs)
	}
	if len(dst) != 63 {
		t.Errorf("len(Blocks()) = %d, want 63", len(dst))
	}
}

func TestBlocksPanicsOnBadSize(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Blocks(_, 0, _) did not panic, want a panic")
		}
	}()
	Blocks([]uint32{1}, 0, nil)
}
