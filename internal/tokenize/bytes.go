package tokenize

import "slices"

// Bytes returns the byte-based approximation of a tokenizer: one token per 4
// bytes of text, the id being the 4 bytes as a little-endian uint32, the last
// token zero-padded. A text of n bytes gives ceil(n/4) tokens. It accepts any
// bytes, valid UTF-8 or not. Its Name is "bytes"; Close is a no-op.
func Bytes() Encoder { return bytesEncoder{} }

type bytesEncoder struct{}

func (bytesEncoder) Name() string { return "bytes" }

func (bytesEncoder) Close() error { return nil }

func (bytesEncoder) Encode(text string, dst []uint32) []uint32 {
	dst = slices.Grow(dst, (len(text)+3)/4)
	i := 0
	for ; i+4 <= len(text); i += 4 {
		dst = append(dst, uint32(text[i])|uint32(text[i+1])<<8|uint32(text[i+2])<<16|uint32(text[i+3])<<24)
	}
	if i < len(text) {
		var id uint32
		for j := len(text) - 1; j >= i; j-- {
			id = id<<8 | uint32(text[j])
		}
		dst = append(dst, id)
	}
	return dst
}
