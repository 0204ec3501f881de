package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dualmap/dualmap/internal/hashing"
)

// Kind is the type of one event.
type Kind uint8

// The event types engines publish. Unknown is any other tag: the event is
// skipped, the rest of its batch is not.
const (
	Unknown Kind = iota
	BlockStored
	BlockRemoved
	AllBlocksCleared
)

var kindNames = [...]string{"unknown", "BlockStored", "BlockRemoved", "AllBlocksCleared"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Medium is where a block lives. Only GPU blocks (the default when an
// event leaves it out) are indexed: a block on another tier must be
// loaded back before it saves prefill, at a cost the router does not
// model.
type Medium uint8

// Media. Other covers every tier but the GPU's: vLLM's CPU, STORAGE (older
// FS, OBJ); SGLang's CPU_PINNED, DISK, EXTERNAL (older CPU_TIER1, 2).
const (
	GPU Medium = iota
	CPU
	Other
)

func mediumOf(s []byte) Medium {
	switch string(s) {
	case "GPU", "gpu", "":
		return GPU
	case "CPU", "cpu", "CPU_PINNED", "CPU_TIER1":
		return CPU
	}
	return Other
}

// Event is one decoded event. Its slices point into the Decoder's
// buffers and are valid until the Decoder's next call.
type Event struct {
	Kind Kind
	// Hashes are the engine's block hashes as 64 bits: unsigned and
	// signed integers as their bits, byte strings folded by a 64-bit hash.
	Hashes []uint64
	// Parent is the engine hash of the block before the first of Hashes;
	// HasParent is false for a prompt's first block.
	Parent    uint64
	HasParent bool
	// Tokens are the stored blocks' token ids, BlockSize per block.
	Tokens    []uint32
	BlockSize int
	Medium    Medium
	Group     int // KV-cache group (hybrid models); nil or absent = 0
	// Keyable is how many leading blocks carry no extra key (LoRA, cache
	// salt, multimodal input): the router's key of a block is a function
	// of its tokens only, so blocks from the first one with an extra key
	// on are not indexed.
	Keyable int
}

// Batch is one published batch of events.
type Batch struct {
	TS     float64
	Events []Event
	// Rank is the data-parallel rank (vLLM's data_parallel_rank, SGLang's
	// attn_dp_rank), -1 when absent or nil.
	Rank int
	// Skipped counts the events left out: unknown types and events whose
	// fields could not be used (a hash list that is no list, tokens that
	// are no 32-bit ids).
	Skipped int
}

// Limits bound what one frame may hold.
const (
	// MaxFrame is the largest payload decoded, in bytes.
	MaxFrame = 8 << 20
	// maxTopic is the longest topic frame accepted.
	maxTopic = 1024
)

// ErrFrame is a message that is no KV-events message: wrong frame count,
// a sequence number that is not 8 bytes, a payload that is no MessagePack
// batch.
var ErrFrame = errors.New("kvevents: bad frame")

// Message is one live or replayed message: its topic, sequence number and
// payload.
type Message struct {
	Topic   []byte
	Seq     int64
	Payload []byte
}

// SplitLive splits a live PUB message [topic, seq, payload]. A message of
// two frames [seq, payload] (a publisher with no topic frame) is accepted
// too.
func SplitLive(frames [][]byte) (Message, error) {
	switch len(frames) {
	case 3:
		return message(frames[0], frames[1], frames[2])
	case 2:
		return message(nil, frames[0], frames[1])
	}
	return Message{}, fmt.Errorf("%w: %d frames", ErrFrame, len(frames))
}

// SplitReplay splits a message from a replay socket as a DEALER receives
// it: an empty delimiter frame, then [topic, seq, payload] (recent vLLM)
// or [seq, payload] (older vLLM, SGLang). The end marker has seq -1.
func SplitReplay(frames [][]byte) (Message, error) {
	if len(frames) > 0 && len(frames[0]) == 0 {
		frames = frames[1:]
	}
	switch len(frames) {
	case 3:
		return message(frames[0], frames[1], frames[2])
	case 2:
		return message(nil, frames[0], frames[1])
	}
	return Message{}, fmt.Errorf("%w: replay reply of %d frames", ErrFrame, len(frames))
}

func message(topic, seq, payload []byte) (Message, error) {
	if len(seq) != 8 {
		return Message{}, fmt.Errorf("%w: sequence of %d bytes, want 8", ErrFrame, len(seq))
	}
	if len(topic) > maxTopic {
		return Message{}, fmt.Errorf("%w: topic of %d bytes", ErrFrame, len(topic))
	}
	if len(payload) > MaxFrame {
		return Message{}, fmt.Errorf("%w: payload of %d bytes", ErrFrame, len(payload))
	}
	return Message{Topic: topic, Seq: int64(binary.BigEndian.Uint64(seq)), Payload: payload}, nil
}

// Decoder decodes payloads. It reuses its buffers: a Batch is valid until
// the next Decode. Not for concurrent use.
type Decoder struct {
	events []Event
	hashes []uint64
	tokens []uint32
	spans  []span // per event, where its slices start and end in hashes, tokens
}

type span struct{ h0, h1, t0, t1 int }

// Decode decodes one payload, [ts, events, rank] with any trailing fields
// (or a map with those keys). An error means the payload as a whole is
// unreadable; events that are merely unknown or unusable are counted in
// Batch.Skipped.
func (d *Decoder) Decode(payload []byte) (Batch, error) {
	d.events, d.hashes, d.tokens, d.spans = d.events[:0], d.hashes[:0], d.tokens[:0], d.spans[:0]
	r := reader{b: payload}
	b := Batch{Rank: -1}
	if n, ok := r.arrayLen(); ok {
		for i := 0; i < n && r.err == nil; i++ {
			switch i {
			case 0:
				b.TS, _ = d.scalarFloat(&r)
			case 1:
				if !d.eventList(&r, &b) {
					return Batch{}, fmt.Errorf("%w: events are no list", ErrFrame)
				}
			case 2:
				b.Rank = rank(&r)
			default:
				r.skip()
			}
		}
	} else if n, ok := r.mapLen(); ok {
		for i := 0; i < n && r.err == nil; i++ {
			key, _ := r.bytes()
			switch string(key) {
			case "ts":
				b.TS, _ = d.scalarFloat(&r)
			case "events":
				if !d.eventList(&r, &b) {
					return Batch{}, fmt.Errorf("%w: events are no list", ErrFrame)
				}
			case "data_parallel_rank", "attn_dp_rank", "dp_rank":
				b.Rank = rank(&r)
			default:
				r.skip()
			}
		}
	} else if r.err == nil {
		return Batch{}, fmt.Errorf("%w: payload is no batch", ErrFrame)
	}
	if r.err != nil {
		return Batch{}, fmt.Errorf("%w: %w", ErrFrame, r.err)
	}
	if r.left() != 0 {
		return Batch{}, fmt.Errorf("%w: %d bytes after the batch", ErrFrame, r.left())
	}
	for i := range d.events {
		s := d.spans[i]
		d.events[i].Hashes = d.hashes[s.h0:s.h1:s.h1]
		d.events[i].Tokens = d.tokens[s.t0:s.t1:s.t1]
	}
	b.Events = d.events
	return b, nil
}

func (d *Decoder) scalarFloat(r *reader) (float64, bool) {
	if f, ok := r.float(); ok {
		return f, true
	}
	r.skip()
	return 0, false
}

func rank(r *reader) int {
	if v, neg, ok := r.integer(); ok {
		if neg || v > 1<<16 {
			return -1
		}
		return int(v)
	}
	r.skip()
	return -1
}

// eventList reads the list of events; false if the value is no list.
func (d *Decoder) eventList(r *reader, b *Batch) bool {
	n, ok := r.arrayLen()
	if !ok {
		return false
	}
	for i := 0; i < n && r.err == nil; i++ {
		d.event(r, b)
	}
	return true
}

// Field positions of the array encoding, after the tag.
const (
	fHashes = iota
	fParent
	fTokens
	fBlockSize
	fLoRAID
	fMedium
	fLoRAName
	fExtraKeys
	fGroup
)

// Positions of BlockRemoved's fields, after the tag.
const (
	rHashes = iota
	rMedium
	rGroup
)

// event reads one event (array or map encoding) and appends it unless it
// is unknown or unusable.
func (d *Decoder) event(r *reader, b *Batch) {
	e := Event{Keyable: -1}
	sp := span{h0: len(d.hashes), t0: len(d.tokens)}
	sp.h1, sp.t1 = sp.h0, sp.t0
	bad := false
	if n, ok := r.arrayLen(); ok {
		if n == 0 {
			b.Skipped++
			return
		}
		tag, _ := r.bytes()
		e.Kind = kindTag(tag)
		for i := 1; i < n && r.err == nil; i++ {
			f := i - 1
			if e.Kind == BlockRemoved {
				switch f { // map BlockRemoved's positions onto BlockStored's
				case rHashes:
					f = fHashes
				case rMedium:
					f = fMedium
				case rGroup:
					f = fGroup
				default:
					f = -1
				}
			}
			if !d.field(r, f, &e, &sp) {
				bad = true
			}
		}
	} else if n, ok := r.mapLen(); ok {
		for i := 0; i < n && r.err == nil; i++ {
			key, ok := r.bytes()
			if !ok {
				r.skip() // a key that is no string, then its value
				r.skip()
				continue
			}
			f := -1
			switch string(key) {
			case "type":
				tag, _ := r.bytes()
				e.Kind = kindTag(tag)
				continue
			case "block_hashes":
				f = fHashes
			case "parent_block_hash":
				f = fParent
			case "token_ids":
				f = fTokens
			case "block_size":
				f = fBlockSize
			case "lora_id":
				f = fLoRAID
			case "medium":
				f = fMedium
			case "lora_name", "cache_salt":
				f = fLoRAName
			case "extra_keys":
				f = fExtraKeys
			case "group_idx":
				f = fGroup
			}
			if !d.field(r, f, &e, &sp) {
				bad = true
			}
		}
	} else {
		r.skip()
		b.Skipped++
		return
	}
	if r.err != nil {
		return
	}
	if bad || e.Kind == Unknown || !d.valid(&e, sp) {
		d.hashes, d.tokens = d.hashes[:sp.h0], d.tokens[:sp.t0]
		b.Skipped++
		return
	}
	nb := sp.h1 - sp.h0
	if e.Keyable < 0 || e.Keyable > nb {
		e.Keyable = nb
	}
	d.events = append(d.events, e)
	d.spans = append(d.spans, sp)
}

// valid checks what an event's kind needs of its fields.
func (d *Decoder) valid(e *Event, sp span) bool {
	switch e.Kind {
	case BlockStored:
		nb, nt := sp.h1-sp.h0, sp.t1-sp.t0
		if e.BlockSize <= 0 && nb > 0 && nt%nb == 0 {
			e.BlockSize = nt / nb // a publisher that left it out
		}
		return nb > 0 && e.BlockSize > 0 && nt == nb*e.BlockSize
	case BlockRemoved:
		return sp.h1 > sp.h0
	}
	return true
}

func kindTag(tag []byte) Kind {
	switch string(tag) {
	case "BlockStored":
		return BlockStored
	case "BlockRemoved":
		return BlockRemoved
	case "AllBlocksCleared":
		return AllBlocksCleared
	}
	return Unknown
}

// field reads the value of field f (-1: unknown, skipped) into e; false
// when the value cannot be used (the event is then skipped).
func (d *Decoder) field(r *reader, f int, e *Event, sp *span) bool {
	if r.nil() {
		return true // a field at its default
	}
	switch f {
	case fHashes:
		if n, ok := r.arrayLen(); ok {
			good := true
			for i := 0; i < n && r.err == nil; i++ {
				if h, ok := hashValue(r); ok && good {
					d.hashes = append(d.hashes, h)
				} else {
					good = false // read the rest, keep none
				}
			}
			if !good {
				return false
			}
		} else if h, _, ok := r.integer(); ok { // a single hash
			d.hashes = append(d.hashes, h)
		} else {
			r.skip()
			return false
		}
		sp.h1 = len(d.hashes)
	case fParent:
		h, ok := hashValue(r)
		if !ok {
			return false
		}
		e.Parent, e.HasParent = h, true
	case fTokens:
		n, ok := r.arrayLen()
		if !ok {
			return false
		}
		good := true
		for i := 0; i < n && r.err == nil; i++ {
			v, neg, ok := r.integer()
			if !ok {
				r.skip()
			}
			if !ok || neg || v > 1<<32-1 {
				good = false // read the rest, keep none
				continue
			}
			d.tokens = append(d.tokens, uint32(v))
		}
		if !good {
			return false
		}
		sp.t1 = len(d.tokens)
	case fBlockSize:
		v, neg, ok := r.integer()
		if !ok || neg || v > 1<<20 {
			r.skip()
			return false
		}
		e.BlockSize = int(v)
	case fLoRAID:
		r.skip()
		e.Keyable = 0 // any LoRA adapter
	case fMedium:
		s, ok := r.bytes()
		if !ok {
			r.skip()
			return true // an unknown shape of medium: treat as the default
		}
		e.Medium = mediumOf(s)
	case fLoRAName:
		switch r.peek() {
		case kindStr, kindBin:
			if s, _ := r.bytes(); len(s) > 0 {
				e.Keyable = 0
			}
		case kindMap: // SGLang's {cache_salt: ...} (or any keyed extra)
			n, _ := r.mapLen()
			for i := 0; i < n && r.err == nil; i++ {
				r.skip()
				if r.nil() {
					continue
				}
				r.skip()
				e.Keyable = 0
			}
		default:
			r.skip()
			e.Keyable = 0
		}
	case fExtraKeys:
		n, ok := r.arrayLen()
		if !ok {
			r.skip()
			e.Keyable = 0
			return true
		}
		first := -1
		for i := 0; i < n && r.err == nil; i++ {
			if r.nil() {
				continue
			}
			if m, ok := r.arrayLen(); ok && m == 0 {
				continue // an empty tuple: no extra key
			} else if ok {
				for j := 0; j < m && r.err == nil; j++ {
					r.skip()
				}
			} else {
				r.skip()
			}
			if first < 0 {
				first = i
			}
		}
		if first >= 0 && (e.Keyable < 0 || first < e.Keyable) {
			e.Keyable = first
		}
	case fGroup:
		v, neg, ok := r.integer()
		if !ok || neg || v > 1<<16 {
			r.skip()
			return false
		}
		e.Group = int(v)
	default:
		r.skip()
	}
	return r.err == nil
}

// hashValue reads a block hash: an integer's 64 bits, or a byte string
// folded to 64 bits.
func hashValue(r *reader) (uint64, bool) {
	if v, _, ok := r.integer(); ok {
		return v, true
	}
	if s, ok := r.bytes(); ok {
		return hashing.Mix64(hashing.FNV1a(s)), true
	}
	r.skip()
	return 0, false
}
