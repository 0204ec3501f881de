package engine

// Tiers of a cached block.
const (
	tierNone uint8 = iota // not cached
	tierHBM
	tierDRAM
)

// Sentinels of the two LRU lists in cache.nodes.
const (
	hbmList  int32 = 0
	dramList int32 = 1
)

// cache is the two-tier LRU prefix cache of one engine, in blocks.
//
// Each tier is a doubly linked list threaded through one slice of nodes,
// most recent first, with a sentinel node per list (nodes[0] for HBM,
// nodes[1] for DRAM: sentinel.next is the most recent block, sentinel.prev
// the least recent). slot maps a block hash to its node. A full cache reuses
// the node of the block it evicts, so once full no operation allocates
// (beyond what the Go map may do internally).
//
// Blocks enter at the head of HBM; HBM overflow moves its tail to the head
// of DRAM; DRAM overflow drops its tail. Every block in HBM is therefore more
// recent than every block in DRAM, and the two lists read HBM then DRAM are
// one LRU order of capacity hbmCap+dramCap.
type cache struct {
	hbmCap, dramCap int
	hbmLen, dramLen int
	slot            map[uint64]int32
	nodes           []cacheNode
	obs             func(uint64, CacheChange) // Engine.ObserveCache, or nil
}

func (c *cache) note(h uint64, ch CacheChange) {
	if c.obs != nil {
		c.obs(h, ch)
	}
}

type cacheNode struct {
	hash       uint64
	prev, next int32
	tier       uint8
}

// newCache returns an empty cache holding at most hbmBlocks blocks in HBM
// and dramBlocks blocks in DRAM.
func newCache(hbmBlocks, dramBlocks int) *cache {
	hint := min(hbmBlocks+dramBlocks, 1<<16)
	c := &cache{
		hbmCap:  max(hbmBlocks, 0),
		dramCap: max(dramBlocks, 0),
		slot:    make(map[uint64]int32, hint),
		nodes:   make([]cacheNode, 2, 2+hint),
	}
	for _, s := range []int32{hbmList, dramList} {
		c.nodes[s].prev, c.nodes[s].next = s, s
	}
	return c
}

// capacity returns the total capacity in blocks.
func (c *cache) capacity() int { return c.hbmCap + c.dramCap }

// len returns the number of cached blocks.
func (c *cache) len() int { return c.hbmLen + c.dramLen }

// tier reports where block h is cached, or tierNone.
func (c *cache) tier(h uint64) uint8 {
	if i, ok := c.slot[h]; ok {
		return c.nodes[i].tier
	}
	return tierNone
}

// prefixLen returns how many leading blocks of blocks are cached, in either
// tier, up to the first one that is not.
func (c *cache) prefixLen(blocks []uint64) int {
	for i, h := range blocks {
		if _, ok := c.slot[h]; !ok {
			return i
		}
	}
	return len(blocks)
}

// insert makes blocks the most recent, deepest first, so that each block
// ends up more recent than the blocks after it. Blocks beyond the total
// capacity are skipped: the leading blocks are what later prompts share.
func (c *cache) insert(blocks []uint64) {
	if n := c.capacity(); len(blocks) > n {
		blocks = blocks[:n]
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		c.touch(blocks[i])
	}
}

// touch makes block h the most recent block, in HBM, adding it if absent,
// and reports whether it was in DRAM. Evictions keep both tiers within
// capacity. It does nothing when the cache has no capacity.
func (c *cache) touch(h uint64) (wasDRAM bool) {
	if c.capacity() == 0 {
		return false
	}
	i, ok := c.slot[h]
	switch {
	case ok:
		wasDRAM = c.nodes[i].tier == tierDRAM
		c.unlink(i)
	case c.len() >= c.capacity():
		i = c.nodes[c.lastList()].prev // reuse the globally least recent node
		old := c.nodes[i].hash
		if c.nodes[i].tier == tierHBM {
			c.note(old, BlockEvicted)
		}
		c.note(old, BlockDropped)
		delete(c.slot, old)
		c.unlink(i)
		c.nodes[i].hash = h
		c.slot[h] = i
	default:
		c.nodes = append(c.nodes, cacheNode{hash: h})
		i = int32(len(c.nodes) - 1)
		c.slot[h] = i
	}
	if !ok || wasDRAM {
		c.note(h, BlockCached)
	}
	c.pushFront(hbmList, i)
	for c.hbmLen > c.hbmCap { // at most once; also when hbmCap is 0
		t := c.nodes[hbmList].prev
		c.unlink(t)
		c.note(c.nodes[t].hash, BlockEvicted)
		c.pushFront(dramList, t) // dramCap > 0 here: the total capacity is not exceeded
	}
	return wasDRAM
}

// lastList returns the list holding the least recent block.
func (c *cache) lastList() int32 {
	if c.dramLen > 0 {
		return dramList
	}
	return hbmList
}

func (c *cache) unlink(i int32) {
	n := &c.nodes[i]
	c.nodes[n.prev].next = n.next
	c.nodes[n.next].prev = n.prev
	if n.tier == tierHBM {
		c.hbmLen--
	} else {
		c.dramLen--
	}
	n.tier = tierNone
}

func (c *cache) pushFront(list, i int32) {
	n := &c.nodes[i]
	n.prev, n.next = list, c.nodes[list].next
	c.nodes[n.next].prev = i
	c.nodes[list].next = i
	if list == hbmList {
		n.tier = tierHBM
		c.hbmLen++
	} else {
		n.tier = tierDRAM
		c.dramLen++
	}
}
