package trace

import "testing"

func TestChainIDs(t *testing.T) {
	chain := func(ids ...uint64) []uint64 { chainIDs(ids); return ids }
	a, b, c := chain(5, 6, 7), chain(5, 6, 8), chain(6, 6, 7)
	tests := []struct {
		name      string
		x, y      uint64
		wantEqual bool
	}{
		{"same prefix, depth 1", a[0], b[0], true},
		{"same prefix, depth 2", a[1], b[1], true},
		{"different last block", a[2], b[2], false},
		{"different first block propagates", a[2], c[2], false},
		{"different first block, same second id", a[1], c[1], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x == tt.y; got != tt.wantEqual {
				t.Errorf("%#x == %#x is %v, want %v", tt.x, tt.y, got, tt.wantEqual)
			}
		})
	}
}

func TestReplicaMapDisjoint(t *testing.T) {
	seen := make(map[uint64]int)
	for c := range 4 {
		f := func(b uint64) uint64 { return b }
		if c > 0 {
			f = replicaMap(99, c)
		}
		for b := range uint64(10_000) {
			v := f(b)
			if prev, ok := seen[v]; ok {
				t.Fatalf("copy %d maps block %d to %#x, already used by copy %d", c, b, v, prev)
			}
			seen[v] = c
		}
	}
}

// TestTraceIDsPinned pins chained and replicated ids, computed before they
// moved onto package hashing: simulated results depend on them.
func TestTraceIDsPinned(t *testing.T) {
	ids := []uint64{5, 6, 7}
	chainIDs(ids)
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"chainIDs(5 6 7)[0]", ids[0], 0x0a11a9bf2fe3743c},
		{"chainIDs(5 6 7)[1]", ids[1], 0x40702c9736f2b7d7},
		{"chainIDs(5 6 7)[2]", ids[2], 0x9be101981c488e80},
		{"replicaMap(99, 1)(7)", replicaMap(99, 1)(7), 0x93ef45557ca4744c},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
			}
		})
	}
}
