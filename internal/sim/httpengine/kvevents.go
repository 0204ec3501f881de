package httpengine

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/openai"
	"github.com/dualmap/dualmap/internal/sim/engine"
	"github.com/dualmap/dualmap/internal/tokenize"
)

// KV-cache events, as vLLM publishes them (Options.KVEvents): the engine
// renders and tokenizes each prompt itself (its own chat rendering over
// the byte encoder, the format the router's tokenize package documents),
// hashes its blocks with its own function (SHA-256 of the parent's hash
// and the block's token ids, the low 64 bits, as vLLM's default), and
// publishes BlockStored (with the token ids) when a block enters its
// accelerator memory and BlockRemoved when it leaves. The router cannot
// compute these hashes: it keys the blocks by the token ids, as it must
// with a real engine.

// blockInfo is what a published event needs of one cached block.
type blockInfo struct {
	hash, parent uint64 // the engine's hashes; parent 0 for the first block
	depth        int    // the block's index in its prompt
	tokens       []uint32
}

// kvState is Run's publishing state; only Run's goroutine touches it.
type kvState struct {
	pub     *kvevents.Publisher
	bs      int
	info    map[uint64]blockInfo // by the engine's cache key (engine.Request.Blocks)
	limit   int                  // len(info) beyond which entries of blocks no longer cached are pruned
	pending []kvevents.Event
	run     []uint64 // keys of the consecutive BlockCached changes not yet turned into events
	e       *engine.Engine
}

func newKVState(s *Server, e *engine.Engine) *kvState {
	_, _, capBlocks := e.KVBlocks()
	return &kvState{pub: s.opt.KVEvents, bs: s.opt.BlockSize, info: map[uint64]blockInfo{}, limit: 4*capBlocks + 1<<16, e: e}
}

// engineTokens renders req as this engine does and returns its token ids:
// each chat message as "<|role|>\n" and its content, then
// "<|assistant|>\n", each piece encoded on its own (the byte encoder's
// tokens do not cross the pieces, as the router's documented
// approximation has it); a completion's first prompt as it is.
func engineTokens(req *openai.Request) []uint32 {
	enc := tokenize.Bytes()
	if len(req.Messages) > 0 {
		var toks []uint32
		for _, m := range req.Messages {
			toks = enc.Encode("<|"+m.Role+"|>\n", toks)
			toks = enc.Encode(m.Content, toks)
		}
		return enc.Encode("<|assistant|>\n", toks)
	}
	if len(req.Prompts) > 0 {
		return enc.Encode(req.Prompts[0], nil)
	}
	return nil
}

func engineHash(parent uint64, toks []uint32) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], parent)
	h.Write(b[:])
	buf := make([]byte, 4*len(toks))
	for i, t := range toks {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	h.Write(buf)
	return binary.BigEndian.Uint64(h.Sum(nil)[24:])
}

// learn records the blocks of a submitted request: its cache keys and
// the tokens they were computed from.
func (k *kvState) learn(r *engine.Request, toks []uint32) {
	parent := uint64(0)
	for i, key := range r.Blocks {
		if (i+1)*k.bs > len(toks) {
			break // a partial last block is never stored
		}
		if in, ok := k.info[key]; ok {
			parent = in.hash
			continue
		}
		bt := slices.Clone(toks[i*k.bs : (i+1)*k.bs])
		h := engineHash(parent, bt)
		k.info[key] = blockInfo{hash: h, parent: parent, depth: i, tokens: bt}
		parent = h
	}
	if len(k.info) > k.limit {
		for key := range k.info {
			if !k.e.Holds(key) {
				delete(k.info, key)
			}
		}
	}
}

// observe is the engine's cache observer.
func (k *kvState) observe(key uint64, c engine.CacheChange) {
	switch c {
	case engine.BlockCached:
		if _, ok := k.info[key]; ok {
			k.run = append(k.run, key)
		}
	case engine.BlockEvicted:
		in, ok := k.info[key]
		if !ok {
			return
		}
		k.closeRun()
		if n := len(k.pending); n > 0 && k.pending[n-1].Kind == kvevents.BlockRemoved {
			k.pending[n-1].Hashes = append(k.pending[n-1].Hashes, in.hash)
			return
		}
		k.pending = append(k.pending, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: []uint64{in.hash}})
	}
}

// closeRun turns the pending BlockCached changes into events, parents
// first (the engine touches a prompt's blocks deepest first).
func (k *kvState) closeRun() {
	if len(k.run) == 0 {
		return
	}
	slices.SortStableFunc(k.run, func(a, b uint64) int { return k.info[a].depth - k.info[b].depth })
	for _, key := range k.run {
		in := k.info[key]
		k.pending = append(k.pending, kvevents.Event{Kind: kvevents.BlockStored, Hashes: []uint64{in.hash},
			Parent: in.parent, HasParent: in.depth > 0, Tokens: in.tokens, BlockSize: k.bs})
	}
	k.run = k.run[:0]
}

// flush publishes what changed since the last flush as one batch.
func (k *kvState) flush() {
	k.closeRun()
	if len(k.pending) == 0 {
		return
	}
	_ = k.pub.Publish(float64(time.Now().UnixNano())/1e9, k.pending, -1) // a slow subscriber sees a gap
	clear(k.pending)
	k.pending = k.pending[:0]
}
