// Package mix holds the 64-bit integer mixer the project's hashes share, so
// that every package derives ring positions, chained block ids and
// synthetic text from one definition.
package mix

// Golden is 2^64 divided by the golden ratio, the SplitMix64 increment.
const Golden = 0x9e3779b97f4a7c15

// Mix64 is the SplitMix64 finaliser (Stafford's variant 13): a bijection
// of uint64 with full avalanche. Stable across versions: ring positions
// and trace ids depend on it.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
