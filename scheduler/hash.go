package scheduler

import "github.com/dualmap/dualmap/internal/mix"

// mix64 is the shared SplitMix64 finaliser. Ring positions and key
// positions both go through it, with a per-ring seed, so the rings are
// independent hash functions of the same key.
func mix64(x uint64) uint64 { return mix.Mix64(x) }

// seeded hashes x under seed: distinct seeds give independent-looking
// functions of x.
func seeded(seed, x uint64) uint64 {
	return mix64(x ^ mix64(seed+0x9e3779b97f4a7c15))
}

// hashString is FNV-1a over s followed by mix64; stable across processes
// and versions, so every replica places an instance at the same points.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// ChainHash returns the chained hash of a block whose own content hash is
// block and whose parent prefix hashed to parent (0 for the first block).
// Equal results mean equal prefixes (up to 64-bit collisions). Tokenizers
// and trace readers that produce per-block ids use it to build the chained
// hashes Request.Blocks expects.
func ChainHash(parent, block uint64) uint64 {
	return mix64(parent*0x9e3779b97f4a7c15 ^ mix64(block+0x632be59bd9b4e019))
}
