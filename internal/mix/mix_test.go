package mix

import "testing"

// Pinned values: changing the mixer remaps every ring and trace id.
func TestMix64Pinned(t *testing.T) {
	tests := []struct{ in, want uint64 }{
		{0, 0},
		{1, 0x5692161d100b05e5},
		{Golden, 0xe220a8397b1dcdaf},
	}
	for _, tt := range tests {
		if got := Mix64(tt.in); got != tt.want {
			t.Errorf("Mix64(%#x) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}
