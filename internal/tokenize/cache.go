package tokenize

import (
	"strings"
	"sync"
)

// CacheStats counts the per-message token cache's activity since the
// Prompter was made.
type CacheStats struct {
	Hits      uint64 // messages whose tokens came from the cache
	Misses    uint64 // messages that were tokenized (cache disabled included)
	Evictions uint64 // entries dropped to respect the bounds
	Entries   int    // entries held now
	Tokens    int    // tokens held now, summed over entries
}

// cacheKey identifies a message: key is the map key; check, role and size
// guard against a 64-bit collision of key (see msgKey).
type cacheKey struct {
	key   uint64
	check uint64
	role  string
	size  int // content length in bytes
}

// entry is one cached message: its key and its tokens, which are never
// modified once the entry exists.
type entry struct {
	k          cacheKey
	tokens     []uint32
	prev, next *entry
}

// lru is a least-recently-used map from message keys to token slices,
// bounded both by entry count and by the tokens held. With maxEntries < 1 it
// stores nothing and only counts misses. Safe for concurrent use.
type lru struct {
	maxEntries int
	maxTokens  int

	mu     sync.Mutex
	items  map[uint64]*entry
	root   entry // sentinel: root.next is the most recently used
	tokens int
	stats  CacheStats
}

func newLRU(maxEntries, maxTokens int) *lru {
	c := &lru{maxEntries: maxEntries, maxTokens: maxTokens, items: make(map[uint64]*entry)}
	c.root.prev, c.root.next = &c.root, &c.root
	return c
}

// get returns the tokens stored for k, or nil and false. The returned slice
// must not be modified. It counts a hit or a miss.
func (c *lru) get(k cacheKey) ([]uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxEntries < 1 {
		c.stats.Misses++
		return nil, false
	}
	e, ok := c.items[k.key]
	if !ok || e.k != k {
		c.stats.Misses++
		return nil, false
	}
	c.stats.Hits++
	c.unlink(e)
	c.pushFront(e)
	return e.tokens, true
}

// add stores a copy of tokens under k, replacing any entry with the same
// map key, and evicts the least recently used entries until both bounds
// hold. A slice longer than the token bound is not stored.
func (c *lru) add(k cacheKey, tokens []uint32) {
	if c.maxEntries < 1 || len(tokens) > c.maxTokens {
		return
	}
	k.role = strings.Clone(k.role) // do not pin the request that held it
	e := &entry{k: k, tokens: append([]uint32(nil), tokens...)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[k.key]; ok {
		c.remove(old)
	}
	c.items[k.key] = e
	c.pushFront(e)
	c.tokens += len(e.tokens)
	for len(c.items) > c.maxEntries || c.tokens > c.maxTokens {
		c.remove(c.root.prev)
		c.stats.Evictions++
	}
}

func (c *lru) snapshot() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = len(c.items)
	s.Tokens = c.tokens
	return s
}

func (c *lru) remove(e *entry) {
	c.unlink(e)
	delete(c.items, e.k.key)
	c.tokens -= len(e.tokens)
}

func (c *lru) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (c *lru) pushFront(e *entry) {
	e.prev = &c.root
	e.next = c.root.next
	e.next.prev = e
	c.root.next = e
}
