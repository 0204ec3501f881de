package scheduler

// kvIndex is the router's estimate of which chained block hashes one
// instance holds in its KV cache: an LRU set bounded by the instance's cache
// capacity in blocks.
//
// Blocks of a prompt are touched deepest first, so a prefix is always at
// least as recent as anything below it and eviction removes the deepest
// blocks first. The set therefore stays prefix-closed for every prompt it
// was given (if block j is held, so are blocks 0..j-1), and the cached
// prefix length of a prompt is found by binary search.
//
// It is an estimate: the engine evicts by its own rules, and blocks are
// recorded when a request is dispatched, before the engine computed them.
// While a request waits in the router queue its blocks are in the
// instance's held index instead (held.go).
// One writer at a time (the instance's lock); cachedBlocks may run
// concurrently with it and with other readers, without a lock (see
// blockSet).
type kvIndex struct {
	capacity int
	slot     blockSet  // block hash -> node index
	nodes    []lruNode // nodes[0] is the list head sentinel
	free     int32     // head of the free list, 0 = none
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

func newKVIndex(capacityBlocks int) *kvIndex {
	kv := &kvIndex{capacity: capacityBlocks}
	kv.nodes = append(kv.nodes, lruNode{}) // sentinel: prev = LRU tail, next = MRU head
	return kv
}

// cachedBlocks returns how many leading blocks of a prompt are held. It
// relies on the prefix-closed invariant and does not lock or allocate.
func (kv *kvIndex) cachedBlocks(blocks []uint64) int { return kv.slot.prefixLen(blocks) }

// add records a prompt's blocks as cached, most recent, evicting the least
// recently used blocks beyond capacity.
func (kv *kvIndex) add(blocks []uint64) {
	if kv.capacity <= 0 {
		return
	}
	if len(blocks) > kv.capacity {
		blocks = blocks[:kv.capacity] // keep the prefix: it is what later prompts share
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		kv.touch(blocks[i])
	}
}

func (kv *kvIndex) touch(h uint64) {
	if i, ok := kv.slot.get(h); ok {
		kv.unlink(i)
		kv.pushFront(i)
		return
	}
	var i int32
	switch {
	case kv.slot.len() >= kv.capacity:
		i = kv.nodes[0].prev // evict the LRU tail and reuse its node
		kv.slot.remove(kv.nodes[i].hash)
		kv.unlink(i)
	case kv.free != 0:
		i = kv.free
		kv.free = kv.nodes[i].next
	default:
		kv.nodes = append(kv.nodes, lruNode{})
		i = int32(len(kv.nodes) - 1)
	}
	kv.nodes[i].hash = h
	kv.slot.put(h, i)
	kv.pushFront(i)
}

func (kv *kvIndex) unlink(i int32) {
	n := &kv.nodes[i]
	kv.nodes[n.prev].next = n.next
	kv.nodes[n.next].prev = n.prev
}

func (kv *kvIndex) pushFront(i int32) {
	head := &kv.nodes[0]
	kv.nodes[i].prev = 0
	kv.nodes[i].next = head.next
	kv.nodes[head.next].prev = i
	head.next = i
}

// len returns the number of blocks held.
func (kv *kvIndex) len() int { return kv.slot.len() }

// setCapacity changes the bound, evicting as needed.
func (kv *kvIndex) setCapacity(blocks int) {
	kv.capacity = blocks
	for kv.slot.len() > max(blocks, 0) {
		i := kv.nodes[0].prev
		kv.slot.remove(kv.nodes[i].hash)
		kv.unlink(i)
		kv.nodes[i].next = kv.free
		kv.free = i
	}
}

// remove takes h out of the set, if it is there.
func (kv *kvIndex) remove(h uint64) {
	i, ok := kv.slot.get(h)
	if !ok {
		return
	}
	kv.slot.remove(h)
	kv.unlink(i)
	kv.nodes[i].next = kv.free
	kv.free = i
}

// clear empties the set; its capacity stays.
func (kv *kvIndex) clear() {
	kv.slot.clear()
	kv.nodes = kv.nodes[:1]
	kv.nodes[0] = lruNode{}
	kv.free = 0
}
