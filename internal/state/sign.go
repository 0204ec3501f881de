package state

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Signed replica state (RedisOptions.RecordKeys). Anyone who can write to
// Redis can write a T:state:<replica> of their own and have it read as a
// replica's load (issue 24). With record keys, a replica's state is
// sealed with an HMAC-SHA256 under the first key, over the pool, the
// replica's id, the time it was written and the encoded state, and another
// replica's state counts only when it opens under one of the keys and was
// written within RecordMaxAge: a writer without a key can neither forge a
// state nor move a replica's state to another id, and can replay one only
// under its own id within RecordMaxAge. Legacy load hashes (T:load), which
// cannot be signed, are not read then. A replica without keys reads a
// sealed state without checking it, so keys can be rolled out one replica
// at a time; see the README (Security) for key rotation.
//
// A sealed value is sealMagic, the write time (8 bytes, Unix
// milliseconds, big-endian), the MAC (32 bytes) and the state.

// sealMagic starts a sealed value. To a ReplicaState decoder it reads as
// an unknown group that never ends, so a release before signed states
// counts a sealed value as malformed: upgrade every replica before
// giving any a key.
const sealMagic = "\xd3dmac1"

const sealHeader = len(sealMagic) + 8 + sha256.Size

// MinRecordKeyBytes is the least length of a record key.
const MinRecordKeyBytes = 16

// MaxRecordKeys bounds the keys a replica accepts (the signing one and
// those being rotated out).
const MaxRecordKeys = 4

// errUnsigned marks a state that does not open under the record keys.
var errUnsigned = errors.New("state: replica state not signed with a record key")

// seal returns state sealed under key for replica at t.
func seal(key []byte, pool, replica string, t time.Time, state []byte) []byte {
	out := make([]byte, 0, sealHeader+len(state))
	out = append(out, sealMagic...)
	out = binary.BigEndian.AppendUint64(out, uint64(t.UnixMilli()))
	out = append(out, recordMAC(key, pool, replica, out[len(sealMagic):], state)...)
	return append(out, state...)
}

// recordMAC is the MAC of a state written by replica at the encoded
// time ts.
func recordMAC(key []byte, pool, replica string, ts, state []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [binary.MaxVarintLen64]byte
	for _, f := range [][]byte{[]byte("dualmap replica state v1"), []byte(pool), []byte(replica), ts} {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))]) // length-prefixed: fields cannot slide
		m.Write(f)
	}
	m.Write(state)
	return m.Sum(nil)
}

// unseal returns the state inside v. With keys, v must be sealed for
// replica under one of them and written at most maxAge before now (or
// maxAge after: clocks differ); without keys a sealed value is opened
// unchecked and anything else is returned as it is.
func unseal(keys [][]byte, pool, replica string, now time.Time, maxAge time.Duration, v string) (string, error) {
	sealed := len(v) >= sealHeader && v[:len(sealMagic)] == sealMagic
	if len(keys) == 0 {
		if sealed {
			return v[sealHeader:], nil
		}
		return v, nil
	}
	if !sealed {
		return "", errUnsigned
	}
	ts := []byte(v[len(sealMagic) : len(sealMagic)+8])
	mac := []byte(v[len(sealMagic)+8 : sealHeader])
	state := []byte(v[sealHeader:])
	ok := false
	for _, k := range keys {
		ok = ok || hmac.Equal(mac, recordMAC(k, pool, replica, ts, state))
	}
	if !ok {
		return "", errUnsigned
	}
	at := time.UnixMilli(int64(binary.BigEndian.Uint64(ts)))
	if d := now.Sub(at); d > maxAge || d < -maxAge {
		return "", fmt.Errorf("%w: written %v from now (more than %v)", errUnsigned, d.Round(time.Millisecond), maxAge)
	}
	return v[sealHeader:], nil
}
