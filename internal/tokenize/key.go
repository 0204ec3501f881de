package tokenize

import "hash/maphash"

// keyer hashes messages into cache keys (see "The message cache" in the
// package doc). Its seeds are random per Prompter, so keys mean nothing
// outside the process, and inputs cannot be crafted to collide without
// knowing the seeds.
//
// A wrong cache hit needs two messages with the same role and content length
// whose contents collide on two independently seeded 64-bit hashes (key and
// check): about 2^-128 per pair of messages, impossible in practice. The
// cache therefore stores no copy of the content.
type keyer struct {
	content, check, role maphash.Seed
}

func newKeyer() keyer {
	return keyer{content: maphash.MakeSeed(), check: maphash.MakeSeed(), role: maphash.MakeSeed()}
}

func (k keyer) key(role, content string) cacheKey {
	return cacheKey{
		key:   maphash.String(k.content, content) ^ maphash.String(k.role, role),
		check: maphash.String(k.check, content),
		role:  role,
		size:  len(content),
	}
}
