package tokenize

import (
	"slices"
	"strings"
	"testing"
)

func TestBytesEncode(t *testing.T) {
	tests := []struct {
		name string
		text string
		dst  []uint32
		want []uint32
	}{
		{"empty", "", nil, nil},
		{"one byte", "a", nil, []uint32{'a'}},
		{"three bytes padded", "abc", nil, []uint32{'a' | 'b'<<8 | 'c'<<16}},
		{"four bytes", "abcd", nil, []uint32{'a' | 'b'<<8 | 'c'<<16 | 'd'<<24}},
		{"five bytes", "abcde", nil, []uint32{'a' | 'b'<<8 | 'c'<<16 | 'd'<<24, 'e'}},
		{"appends to dst", "ab", []uint32{7}, []uint32{7, 'a' | 'b'<<8}},
		{"multi-byte UTF-8", "é", nil, []uint32{0xc3 | 0xa9<<8}},
		{"invalid UTF-8", "\xff\xfe\x00", nil, []uint32{0xff | 0xfe<<8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Bytes().Encode(tt.text, slices.Clone(tt.dst))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %#x, want %#x", tt.text, got, tt.want)
			}
		})
	}
}

func TestBytesCounts(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int
	}{
		{"4000 ASCII bytes", strings.Repeat("abcd", 1000), 1000},
		{"4000 bytes of English", englishText(4000, 1), 1000},
		{"4001 bytes", englishText(4001, 1), 1001},
		{"2-byte runes", strings.Repeat("é", 10), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(Bytes().Encode(tt.text, nil)); got != tt.want {
				t.Errorf("len(Encode()) = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestBytesName(t *testing.T) {
	enc, err := Open("")
	if err != nil {
		t.Fatalf(`Open("") error = %v, want nil`, err)
	}
	if got := enc.Name(); got != "bytes" {
		t.Errorf("Name() = %q, want %q", got, "bytes")
	}
	if err := enc.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
}
