package engine

// CacheChange is what happened to one block of an engine's prefix cache,
// as a real engine's KV-cache events report it.
type CacheChange uint8

// Changes. A block is in the accelerator's memory (HBM) from its
// BlockCached to its BlockEvicted; BlockDropped follows when it leaves the
// engine's memory altogether (at once without a DRAM tier, or when DRAM
// overflows).
const (
	BlockCached  CacheChange = iota // entered HBM with its hash: computed, or loaded back from DRAM
	BlockEvicted                    // left HBM: moved to DRAM, or dropped
	BlockDropped                    // left the cache
)

// ObserveCache makes the engine call f with every change to its cache
// (nil: none), blocks named by their Request.Blocks hashes. f runs inside
// the engine's own calls (Submit, Step, ...) on the caller's goroutine
// and must not call the engine. It costs nothing when not set.
func (e *Engine) ObserveCache(f func(block uint64, c CacheChange)) {
	if e.legacy {
		e.cache.obs = f
	} else {
		e.pool.obs = f
	}
}

// Holds reports whether block is in the engine's cache (either tier).
func (e *Engine) Holds(block uint64) bool {
	if e.legacy {
		return e.cache.tier(block) != tierNone
	}
	return e.pool.tier(block) != tierNone
}
