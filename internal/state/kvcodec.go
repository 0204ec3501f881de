package state

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// A relayed KV entry (field d of T:kvev) is kvVersion, the write time (8
// bytes, Unix nanoseconds, big-endian) and operations, each: its kind (one
// byte), the instance id (uvarint length, bytes), how long before the
// write time the writer heard it (uvarint, microseconds; a snapshot's
// operations carry when the instance was last heard), and for stored and
// removed the block keys (uvarint count, 8 bytes each, big-endian). With
// RecordKeys it is sealed: kvSealMagic, an HMAC-SHA256 under the first key
// over the pool, the writing replica's id and the entry, then the entry.
// The MAC has its own domain string, so a sealed replica state cannot pass
// as an entry, nor an entry as a state. Entries carry no age check: the
// stream's history is what a starting replica rebuilds from.

const (
	kvVersion      = 1
	kvHeader       = 1 + 8
	kvSealMagic    = "\xd3dmkv1"
	kvSealOverhead = len(kvSealMagic) + sha256.Size
	kvMaxAge       = 1 << 40 // microseconds, 12 days: older is written as this
)

type kvKind uint8

const (
	kvStored kvKind = 1 + iota
	kvRemoved
	kvCleared
	kvExact
	kvInexact
	kvKinds
)

// kvOp is one relayed operation on an instance's view.
type kvOp struct {
	kind kvKind
	id   string
	at   int64    // when the writer heard it, Unix nanoseconds (0: when written)
	keys []uint64 // kvStored, kvRemoved
}

// cost is what op counts against the relay's buffer: its keys plus one.
func (op kvOp) cost() int { return len(op.keys) + 1 }

var errKVEntry = errors.New("state: malformed kv relay entry")

// encodeKV writes ops as entries of at most max bytes, cutting the key
// lists of stored and removed operations where needed. Ops on ids longer
// than MaxKVInstanceBytes or not UTF-8 are left out (the pool's ids are
// addresses).
func encodeKV(ops []kvOp, limit int, now time.Time) [][]byte {
	var out [][]byte
	var cur []byte
	wrote := now.UnixNano()
	start := func() {
		if len(cur) > kvHeader {
			out = append(out, cur)
		}
		cur = make([]byte, 0, min(limit, 4096))
		cur = append(cur, kvVersion)
		cur = binary.BigEndian.AppendUint64(cur, uint64(now.UnixNano()))
	}
	start()
	for _, op := range ops {
		if len(op.id) > MaxKVInstanceBytes || !utf8.ValidString(op.id) {
			continue
		}
		head := 1 + 2*binary.MaxVarintLen64 + len(op.id)
		if op.kind != kvStored && op.kind != kvRemoved {
			if len(cur)+head > limit {
				start()
			}
			cur = appendKVHead(cur, op, wrote)
			continue
		}
		head += binary.MaxVarintLen64
		keys := op.keys
		for first := true; first || len(keys) > 0; first = false {
			room := (limit - len(cur) - head) / 8
			if room < 1 && len(cur) > kvHeader {
				start()
				room = (limit - len(cur) - head) / 8
			}
			n := min(len(keys), room)
			cur = appendKVHead(cur, op, wrote)
			cur = binary.AppendUvarint(cur, uint64(n))
			for _, k := range keys[:n] {
				cur = binary.BigEndian.AppendUint64(cur, k)
			}
			keys = keys[n:]
		}
	}
	start()
	return out
}

func appendKVHead(b []byte, op kvOp, wrote int64) []byte {
	b = append(b, byte(op.kind))
	b = binary.AppendUvarint(b, uint64(len(op.id)))
	b = append(b, op.id...)
	var age uint64
	if op.at != 0 && op.at < wrote {
		age = min(uint64(wrote-op.at)/1000, kvMaxAge)
	}
	return binary.AppendUvarint(b, age)
}

// decodeKV reads an entry into ops (appended to dst) and returns when it
// was written (Unix nanoseconds). Every length is checked against what is left before
// anything is allocated for it.
func decodeKV(b string, dst []kvOp) ([]kvOp, int64, error) {
	if len(b) < kvHeader || b[0] != kvVersion {
		return dst, 0, fmt.Errorf("%w: no version %d header", errKVEntry, kvVersion)
	}
	at := int64(binary.BigEndian.Uint64([]byte(b[1:kvHeader])))
	i := kvHeader
	uvarint := func() (uint64, bool) {
		var v uint64
		for s := 0; s < 64 && i < len(b); s += 7 {
			c := b[i]
			i++
			v |= uint64(c&0x7f) << s
			if c < 0x80 {
				return v, true
			}
		}
		return 0, false
	}
	for i < len(b) {
		k := kvKind(b[i])
		i++
		if k < kvStored || k >= kvKinds {
			return dst, 0, fmt.Errorf("%w: unknown operation %d", errKVEntry, k)
		}
		n, ok := uvarint()
		if !ok || n == 0 || n > MaxKVInstanceBytes || n > uint64(len(b)-i) {
			return dst, 0, fmt.Errorf("%w: bad instance length", errKVEntry)
		}
		op := kvOp{kind: k, id: b[i : i+int(n)]}
		i += int(n)
		if !utf8.ValidString(op.id) {
			return dst, 0, fmt.Errorf("%w: instance not UTF-8", errKVEntry)
		}
		age, ok := uvarint()
		if !ok || age > kvMaxAge {
			return dst, 0, fmt.Errorf("%w: bad age", errKVEntry)
		}
		op.at = at - int64(age)*1000
		if k == kvStored || k == kvRemoved {
			c, ok := uvarint()
			if !ok || c > uint64(len(b)-i)/8 {
				return dst, 0, fmt.Errorf("%w: bad key count", errKVEntry)
			}
			op.keys = make([]uint64, c)
			for j := range op.keys {
				op.keys[j] = binary.BigEndian.Uint64([]byte(b[i : i+8]))
				i += 8
			}
		}
		dst = append(dst, op)
	}
	return dst, at, nil
}

// sealKV seals entry e written by replica under key.
func sealKV(key []byte, pool, replica string, e []byte) []byte {
	out := make([]byte, 0, kvSealOverhead+len(e))
	out = append(out, kvSealMagic...)
	out = append(out, kvMAC(key, pool, replica, e)...)
	return append(out, e...)
}

func kvMAC(key []byte, pool, replica string, e []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [binary.MaxVarintLen64]byte
	for _, f := range [][]byte{[]byte("dualmap kv relay v1"), []byte(pool), []byte(replica)} {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write(f)
	}
	m.Write(e)
	return m.Sum(nil)
}

// unsealKV returns the entry inside v: with keys it must be sealed for
// replica under one of them; without, a sealed entry is opened unchecked.
func unsealKV(keys [][]byte, pool, replica, v string) (string, error) {
	sealed := len(v) >= kvSealOverhead && v[:len(kvSealMagic)] == kvSealMagic
	if len(keys) == 0 {
		if sealed {
			return v[kvSealOverhead:], nil
		}
		return v, nil
	}
	if !sealed {
		return "", errUnsigned
	}
	mac := []byte(v[len(kvSealMagic):kvSealOverhead])
	e := []byte(v[kvSealOverhead:])
	for _, k := range keys {
		if hmac.Equal(mac, kvMAC(k, pool, replica, e)) {
			return v[kvSealOverhead:], nil
		}
	}
	return "", errUnsigned
}
