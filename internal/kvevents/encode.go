package kvevents

import (
	"encoding/binary"
	"math"
)

// Encoding is how a publisher encodes events: vLLM's two shapes.
type Encoding uint8

// Encodings.
const (
	// Arrays encodes each event as a positional array whose first element
	// is its tag (vLLM up to about 0.23).
	Arrays Encoding = iota
	// Maps encodes each event as a map with a "type" key (newer vLLM,
	// TensorRT-LLM, llm-d's simulator with use-vllm-map-event-format).
	Maps
)

// Encoder appends vLLM-format payloads (MessagePack) to a buffer. The zero
// value encodes arrays.
type Encoder struct {
	Encoding Encoding
}

// Payload appends the batch [ts, events, rank] to dst and returns it; rank
// < 0 is encoded as nil. Event fields used: Kind, Hashes, Parent and
// HasParent, Tokens, BlockSize, Medium (GPU only: other media are written
// as "CPU").
func (en Encoder) Payload(dst []byte, ts float64, events []Event, rank int) []byte {
	dst = append(dst, 0x93)
	dst = appendFloat(dst, ts)
	dst = appendArrayLen(dst, len(events))
	for i := range events {
		dst = en.event(dst, &events[i])
	}
	if rank < 0 {
		return append(dst, 0xc0)
	}
	return appendUint(dst, uint64(rank))
}

func (en Encoder) event(dst []byte, e *Event) []byte {
	medium := "GPU"
	if e.Medium != GPU {
		medium = "CPU"
	}
	switch e.Kind {
	case BlockStored:
		if en.Encoding == Maps {
			dst = appendMapLen(dst, 8)
			dst = appendStr(dst, "type")
			dst = appendStr(dst, "BlockStored")
			dst = appendStr(dst, "block_hashes")
			dst = appendHashes(dst, e.Hashes)
			dst = appendStr(dst, "parent_block_hash")
			dst = appendParent(dst, e)
			dst = appendStr(dst, "token_ids")
			dst = appendTokens(dst, e.Tokens)
			dst = appendStr(dst, "block_size")
			dst = appendUint(dst, uint64(e.BlockSize))
			dst = appendStr(dst, "lora_id")
			dst = append(dst, 0xc0)
			dst = appendStr(dst, "medium")
			dst = appendStr(dst, medium)
			dst = appendStr(dst, "group_idx")
			return appendUint(dst, uint64(e.Group))
		}
		dst = appendArrayLen(dst, 10)
		dst = appendStr(dst, "BlockStored")
		dst = appendHashes(dst, e.Hashes)
		dst = appendParent(dst, e)
		dst = appendTokens(dst, e.Tokens)
		dst = appendUint(dst, uint64(e.BlockSize))
		dst = append(dst, 0xc0) // lora_id
		dst = appendStr(dst, medium)
		dst = append(dst, 0xc0, 0xc0) // lora_name, extra_keys
		return appendUint(dst, uint64(e.Group))
	case BlockRemoved:
		if en.Encoding == Maps {
			dst = appendMapLen(dst, 4)
			dst = appendStr(dst, "type")
			dst = appendStr(dst, "BlockRemoved")
			dst = appendStr(dst, "block_hashes")
			dst = appendHashes(dst, e.Hashes)
			dst = appendStr(dst, "medium")
			dst = appendStr(dst, medium)
			dst = appendStr(dst, "group_idx")
			return appendUint(dst, uint64(e.Group))
		}
		dst = appendArrayLen(dst, 4)
		dst = appendStr(dst, "BlockRemoved")
		dst = appendHashes(dst, e.Hashes)
		dst = appendStr(dst, medium)
		return appendUint(dst, uint64(e.Group))
	}
	if en.Encoding == Maps {
		dst = appendMapLen(dst, 1)
		dst = appendStr(dst, "type")
		return appendStr(dst, "AllBlocksCleared")
	}
	dst = appendArrayLen(dst, 1)
	return appendStr(dst, "AllBlocksCleared")
}

// AppendSeq appends seq as the 8-byte big-endian frame engines send.
func AppendSeq(dst []byte, seq int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(seq))
}

func appendParent(dst []byte, e *Event) []byte {
	if !e.HasParent {
		return append(dst, 0xc0)
	}
	return appendUint(dst, e.Parent)
}

func appendHashes(dst []byte, hs []uint64) []byte {
	dst = appendArrayLen(dst, len(hs))
	for _, h := range hs {
		dst = appendUint(dst, h)
	}
	return dst
}

func appendTokens(dst []byte, ts []uint32) []byte {
	dst = appendArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = appendUint(dst, uint64(t))
	}
	return dst
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func appendMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// appendUint writes v in the shortest unsigned form, as msgspec does for
// vLLM's hashes (values above 2^63 as uint64).
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}
