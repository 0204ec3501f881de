package openai

import (
	"strconv"
	"strings"
)

// fnv1a returns the 64-bit FNV-1a hash of b.
func fnv1a(b []byte) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

// marker is the text that stands for a non-text content part of type typ
// whose canonical JSON is part: <typ:hash> with the hash in 16 hex digits.
func marker(typ string, part []byte) string {
	h := strconv.FormatUint(fnv1a(part), 16)
	return "<" + typ + ":" + strings.Repeat("0", 16-len(h)) + h + ">"
}
