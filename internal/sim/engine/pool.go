package engine

// LRU sentinels of pool.nodes.
const (
	lruHBM  int32 = 0
	lruDRAM int32 = 1
)

// pool is the KV block memory of an engine with the realistic model: the
// accelerator's blocks (HBM), shared by running requests and the prefix
// cache, plus the optional host-memory tier (DRAM) of cached blocks.
//
// An HBM block is in one of three states. Held: a running request uses it
// (ref > 0); a held block with a hash is shared by every running request
// with that prefix and cannot be evicted; a held block without a hash
// (anonymous: generated tokens, a prompt's blocks still being computed) is
// only counted, in used. Free cached: it has a hash and ref 0; it sits in
// the HBM LRU list and allocation may evict it. Free empty: neither, only
// counted as hbmCap - used - hbmFree. Allocation takes empty blocks first,
// then evicts the least recent free cached block, which moves to the head
// of the DRAM LRU (or is dropped without a DRAM tier; DRAM overflow drops
// its tail).
//
// Invariants: used + hbmFree <= hbmCap and dramLen <= dramCap. Callers
// check free() before they hold or allocate.
type pool struct {
	hbmCap, dramCap int
	used            int // HBM blocks held by running requests
	hbmFree         int // free cached HBM blocks (the HBM LRU list)
	dramLen         int
	slot            map[uint64]int32
	nodes           []poolNode
	spare           []int32 // dropped nodes to reuse
	// gen counts the changes that can make a blocked admission possible:
	// blocks released or shared, blocks dropped (a hit changes).
	gen uint64
	obs func(uint64, CacheChange) // Engine.ObserveCache, or nil
}

func (p *pool) note(h uint64, c CacheChange) {
	if p.obs != nil {
		p.obs(h, c)
	}
}

type poolNode struct {
	hash       uint64
	prev, next int32
	ref        int32 // running requests holding the block (HBM only)
	tier       uint8
}

func newPool(hbmBlocks, dramBlocks int) *pool {
	hint := min(hbmBlocks+dramBlocks, 1<<16)
	p := &pool{
		hbmCap:  max(hbmBlocks, 0),
		dramCap: max(dramBlocks, 0),
		slot:    make(map[uint64]int32, hint),
		nodes:   make([]poolNode, 2, 2+hint),
	}
	for _, s := range []int32{lruHBM, lruDRAM} {
		p.nodes[s].prev, p.nodes[s].next = s, s
	}
	return p
}

// free returns the HBM blocks that allocation can get: empty blocks plus
// free cached ones.
func (p *pool) free() int { return p.hbmCap - p.used }

// tier reports where block h is cached, or tierNone.
func (p *pool) tier(h uint64) uint8 {
	if i, ok := p.slot[h]; ok {
		return p.nodes[i].tier
	}
	return tierNone
}

// prefixLen returns how many leading blocks are present, in either tier,
// held or free, up to the first one that is not.
func (p *pool) prefixLen(blocks []uint64) int {
	for i, h := range blocks {
		if _, ok := p.slot[h]; !ok {
			return i
		}
	}
	return len(blocks)
}

// holdCost returns how many free blocks holding blocks (all present) would
// take: the ones no running request holds yet.
func (p *pool) holdCost(blocks []uint64) int {
	n := 0
	for _, h := range blocks {
		if p.nodes[p.slot[h]].ref == 0 {
			n++
		}
	}
	return n
}

// holdPrefix holds blocks (all present, holdCost(blocks) <= free()): HBM
// blocks first, so that a DRAM block coming back cannot evict one of them.
func (p *pool) holdPrefix(blocks []uint64) {
	for _, h := range blocks {
		if i := p.slot[h]; p.nodes[i].tier == tierHBM {
			p.hold(i)
		}
	}
	for _, h := range blocks {
		if i := p.slot[h]; p.nodes[i].tier == tierDRAM {
			p.hold(i)
		}
	}
}

func (p *pool) hold(i int32) {
	p.gen++
	n := &p.nodes[i]
	switch {
	case n.ref > 0:
		n.ref++
		return
	case n.tier == tierHBM:
		p.unlink(i)
		p.hbmFree--
	default: // DRAM: loaded back into a free HBM block
		p.unlink(i)
		p.dramLen--
		n.tier = tierHBM
		p.note(n.hash, BlockCached)
	}
	n.ref = 1
	p.used++
	p.evict()
}

// alloc takes k anonymous blocks (k <= free()).
func (p *pool) alloc(k int) {
	p.used += k
	p.evict()
}

// release returns k anonymous blocks.
func (p *pool) release(k int) {
	p.used -= k
	p.gen++
}

// register gives one of a request's anonymous blocks the hash h, now that
// its tokens are computed, and keeps it held. If another running request
// already holds h, the request shares that block and its own copy is
// released; a free cached or DRAM copy is superseded by the new block.
func (p *pool) register(h uint64) {
	p.gen++
	i, ok := p.slot[h]
	if !ok {
		i = p.newNode(h)
		n := &p.nodes[i]
		n.tier, n.ref = tierHBM, 1
		p.note(h, BlockCached)
		return
	}
	n := &p.nodes[i]
	switch {
	case n.ref > 0:
		n.ref++
		p.used--
	case n.tier == tierHBM:
		p.unlink(i)
		p.hbmFree--
		n.ref = 1 // the cached copy is kept, the request's own copy freed: used unchanged
	default:
		p.unlink(i)
		p.dramLen--
		n.tier, n.ref = tierHBM, 1
		p.note(h, BlockCached)
	}
}

// unhold drops one hold of block h; at zero it becomes the most recent
// free cached block. Release a request's blocks deepest first so that a
// prefix's first block ends up most recent.
func (p *pool) unhold(h uint64) {
	p.gen++
	i := p.slot[h]
	n := &p.nodes[i]
	n.ref--
	if n.ref == 0 {
		p.used--
		p.pushFront(lruHBM, i)
		p.hbmFree++
	}
}

// evict moves least recent free cached blocks from HBM to DRAM until the
// held and cached blocks fit HBM.
func (p *pool) evict() {
	for p.used+p.hbmFree > p.hbmCap && p.hbmFree > 0 {
		t := p.nodes[lruHBM].prev
		p.unlink(t)
		p.hbmFree--
		p.note(p.nodes[t].hash, BlockEvicted)
		if p.dramCap == 0 {
			p.drop(t)
			continue
		}
		p.pushFront(lruDRAM, t)
		p.dramLen++
		if p.dramLen > p.dramCap {
			d := p.nodes[lruDRAM].prev
			p.unlink(d)
			p.dramLen--
			p.drop(d)
		}
	}
}

func (p *pool) newNode(h uint64) int32 {
	var i int32
	if n := len(p.spare); n > 0 {
		i = p.spare[n-1]
		p.spare = p.spare[:n-1]
		p.nodes[i] = poolNode{hash: h}
	} else {
		p.nodes = append(p.nodes, poolNode{hash: h})
		i = int32(len(p.nodes) - 1)
	}
	p.slot[h] = i
	return i
}

func (p *pool) drop(i int32) {
	p.gen++
	p.note(p.nodes[i].hash, BlockDropped)
	delete(p.slot, p.nodes[i].hash)
	p.nodes[i] = poolNode{}
	p.spare = append(p.spare, i)
}

func (p *pool) unlink(i int32) {
	n := &p.nodes[i]
	p.nodes[n.prev].next = n.next
	p.nodes[n.next].prev = n.prev
}

func (p *pool) pushFront(list, i int32) {
	n := &p.nodes[i]
	n.prev, n.next = list, p.nodes[list].next
	p.nodes[n.next].prev = i
	p.nodes[list].next = i
	if list == lruHBM {
		n.tier = tierHBM
	} else {
		n.tier = tierDRAM
	}
}
