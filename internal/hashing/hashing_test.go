package hashing

import (
	"hash/fnv"
	"testing"
)

// TestGolden pins values computed by the code this package replaced
// (internal/mix, scheduler/hash.go, extproc's sessionKey, tokenize's block
// hash). A failure here means replicas of different versions would place
// instances, keys, sessions or blocks differently: do not update a want
// value to make it pass.
func TestGolden(t *testing.T) {
	const image = `{"type":"image_url","image_url":{"url":"x"}}`
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"Mix64(0)", Mix64(0), 0},
		{"Mix64(1)", Mix64(1), 0x5692161d100b05e5},
		{"Mix64(42)", Mix64(42), 0xa759ea27d4727622},
		{"Mix64(Golden)", Mix64(Golden), 0xe220a8397b1dcdaf},
		{"Mix64(max)", Mix64(^uint64(0)), 0xb4d055fcf2cbbd7b},
		{"SplitMix64(0)", SplitMix64(0), 0xe220a8397b1dcdaf},
		{"SplitMix64(1)", SplitMix64(1), 0x910a2dec89025cc1},
		{"SplitMix64(42)", SplitMix64(42), 0xbdd732262feb6e95},
		{"Seeded(1, 42)", Seeded(1, 42), 0xa9cb101be2f6824f},
		{"Seeded(0, 0)", Seeded(0, 0), 0x48218226ff3cd4bf},
		{"Seeded(7, 1<<63)", Seeded(7, 1<<63), 0x755a8aae17241e45},
		{`String("")`, String(""), 0xf52a15e9a9b5e89b},
		{`String("10.0.0.1:8000")`, String("10.0.0.1:8000"), 0x9201c0cea293f846},
		{`String("10.0.0.2:8000")`, String("10.0.0.2:8000"), 0xebce844cc35e2245},
		{`String("vllm-0")`, String("vllm-0"), 0x133bc7edf7b6a13d},
		{`FNV1a("")`, FNV1a(""), 0xcbf29ce484222325},
		{`FNV1a("a")`, FNV1a("a"), 0xaf63dc4c8601ec8c},
		{"FNV1a(image part)", FNV1a([]byte(image)), 0x97bcbddc0b1ed762},
		{`SessionKey("user-42")`, SessionKey("user-42"), 0x32c6d7a54d35dacb},
		{`SessionKey("")`, SessionKey(""), 0xcbf29ce484222325},
		{"ChainHash(0, 0)", ChainHash(0, 0), 0x58016df76f315627},
		{"ChainHash(0, 1)", ChainHash(0, 1), 0x1450dafff87a9c4e},
		{"ChainHash(ChainHash(0, 1), 2)", ChainHash(ChainHash(0, 1), 2), 0x33ab4c05faf07e7e},
		{"Block(0, [])", Block(0, nil), 0x9ca066f1a4ab2eea},
		{"Block(0, [1])", Block(0, []uint32{1}), 0xa3c38fe24b3da3d2},
		{"Block(0, [1 2 3])", Block(0, []uint32{1, 2, 3}), 0x8ccad8eaf22d60de},
		{"Block(Block(0, [1 2 3]), [4 5])", Block(Block(0, []uint32{1, 2, 3}), []uint32{4, 5}), 0x9c3cea81d4df2296},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
			}
		})
	}
}

// TestFNV1aMatchesStdlib checks FNV1a, for strings and byte slices, against
// the independent implementation in hash/fnv.
func TestFNV1aMatchesStdlib(t *testing.T) {
	for _, s := range []string{"", "a", "user-42", "10.0.0.1:8000", "\x00\xff\x80é"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		want := h.Sum64()
		if got := FNV1a(s); got != want {
			t.Errorf("FNV1a(%q) = %#x, want %#x", s, got, want)
		}
		if got := FNV1a([]byte(s)); got != want {
			t.Errorf("FNV1a([]byte(%q)) = %#x, want %#x", s, got, want)
		}
	}
}
