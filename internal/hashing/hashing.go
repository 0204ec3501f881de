// Package hashing defines every hash function whose values leave a process:
// the 64-bit mixer, the seeded hashes that place keys on the rings, the
// string hash that places an instance's points on a ring, the session key
// of a session header, the FNV-1a hash of a content part's marker, the
// chained block hash of scheduler.Request.Blocks, and the hash of a block of
// token ids (tokenize.Blocks).
//
// These functions are a contract between replicas, and between a router and
// the simulator's published figures: two replicas route a request to the
// same instance only if they compute the same values. Changing any value
// (a constant, a shift, the order of operations) breaks a deployment that
// mixes old and new replicas and changes every simulated result;
// hashing_test.go pins the values so that such a change fails a test.
//
// It is not a place for process-local hashing (random seeds, maps): for
// that use hash/maphash, as tokenize's message cache does.
package hashing

// Golden is 2^64 divided by the golden ratio, the SplitMix64 increment.
const Golden = 0x9e3779b97f4a7c15

// Mix64 is the SplitMix64 finaliser (Stafford's variant 13): a bijection
// of uint64 with full avalanche, and Mix64(0) = 0.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// SplitMix64 is the output of the SplitMix64 generator from state x,
// Mix64(x + Golden); the generator's next state is x + Golden.
func SplitMix64(x uint64) uint64 { return Mix64(x + Golden) }

// Seeded hashes x under seed, Mix64(x ^ SplitMix64(seed)): for a fixed
// seed a bijection of x, and distinct seeds (one per ring) give
// independent-looking functions of the same key.
func Seeded(seed, x uint64) uint64 { return Mix64(x ^ SplitMix64(seed)) }

// FNV-1a 64-bit parameters.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// FNV1a is the 64-bit FNV-1a hash of b.
func FNV1a[T string | []byte](b T) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(b); i++ {
		h ^= uint64(b[i])
		h *= fnvPrime
	}
	return h
}

// String hashes s to 64 well-mixed bits, Mix64(FNV1a(s)). A ring places an
// instance's points from String of its id.
func String(s string) uint64 { return Mix64(FNV1a(s)) }

// SessionKey is the ring key of the session named s (a session header
// value): FNV1a(s), or 1 where that is 0, since a zero key means "no
// session".
func SessionKey(s string) uint64 {
	if h := FNV1a(s); h != 0 {
		return h
	}
	return 1
}

// ChainHash returns the chained hash of a block whose own content hash is
// block and whose parent prefix hashed to parent (0 for the first block).
// Equal results mean equal prefixes (up to 64-bit collisions).
func ChainHash(parent, block uint64) uint64 {
	return Mix64(parent*Golden ^ Mix64(block+0x632be59bd9b4e019))
}
