package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dualmap/dualmap/internal/proto/statepb"
	"github.com/dualmap/dualmap/scheduler"
	"google.golang.org/protobuf/proto"
)

// maxEntryBlocks bounds one stream entry (about 512 KiB of blocks); a
// larger backlog is published as several entries.
const maxEntryBlocks = 1 << 16

// encodeBatches encodes records as DispatchBatch messages of at most
// maxEntryBlocks blocks each (a single larger record gets its own entry).
func encodeBatches(replica string, recs []record, oldest time.Time) ([][]byte, error) {
	var out [][]byte
	msg := &statepb.DispatchBatch{Replica: replica, UnixNanos: oldest.UnixNano()}
	n := 0
	emit := func() error {
		b, err := proto.Marshal(msg)
		if err != nil {
			return fmt.Errorf("state: encode dispatch batch: %w", err)
		}
		out = append(out, b)
		msg.Dispatches, n = msg.Dispatches[:0], 0
		return nil
	}
	for _, r := range recs {
		if n > 0 && n+len(r.blocks) > maxEntryBlocks {
			if err := emit(); err != nil {
				return nil, err
			}
		}
		msg.Dispatches = append(msg.Dispatches, &statepb.Dispatch{Instance: r.instance, Blocks: r.blocks})
		n += len(r.blocks)
	}
	if len(msg.Dispatches) > 0 {
		if err := emit(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeBatch decodes a stream entry's d field into msg (reset first).
func decodeBatch(data string, msg *statepb.DispatchBatch) error {
	if err := proto.Unmarshal([]byte(data), msg); err != nil {
		return fmt.Errorf("state: decode dispatch batch: %w", err)
	}
	return nil
}

// errBadLoad marks a load value that does not decode.
var errBadLoad = errors.New("state: malformed load value")

// encodeState encodes a replica's own load as a ReplicaState message, the
// value of T:state:<replica>. Negative values encode as 0.
func encodeState(load map[string]scheduler.Load) ([]byte, error) {
	msg := &statepb.ReplicaState{Load: make([]*statepb.InstanceLoad, 0, len(load))}
	for id, l := range load {
		msg.Load = append(msg.Load, &statepb.InstanceLoad{
			Instance:      id,
			Queued:        uint64(max(l.Queued, 0)),
			QueuedTokens:  uint64(max(l.QueuedTokens, 0)),
			PendingTokens: uint64(max(l.PendingTokens, 0)),
			Running:       uint64(max(l.Running, 0)),
		})
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("state: encode replica state: %w", err)
	}
	return b, nil
}

// decodeState decodes encodeState's encoding into a load per instance,
// clamping the request counts (queued, running) to maxReqs and the token
// counts to maxTokens; clamped says whether it did. An entry without an
// instance id, or a second entry for the same instance, makes the whole
// value malformed (errBadLoad): no replica writes either. Fields it does
// not know are ignored, so later versions may add them.
func decodeState(data string, maxReqs, maxTokens int) (load map[string]scheduler.Load, clamped bool, err error) {
	var msg statepb.ReplicaState
	if err := proto.Unmarshal([]byte(data), &msg); err != nil {
		return nil, false, fmt.Errorf("%w: replica state: %w", errBadLoad, err)
	}
	load = make(map[string]scheduler.Load, len(msg.Load))
	for i, e := range msg.Load {
		switch _, dup := load[e.Instance]; {
		case e.Instance == "":
			return nil, false, fmt.Errorf("%w: replica state: entry %d has no instance", errBadLoad, i)
		case dup:
			return nil, false, fmt.Errorf("%w: replica state: instance %q appears twice", errBadLoad, e.Instance)
		}
		var c [4]bool
		l := scheduler.Load{}
		l.Queued, c[0] = clamp(e.Queued, maxReqs)
		l.QueuedTokens, c[1] = clamp(e.QueuedTokens, maxTokens)
		l.PendingTokens, c[2] = clamp(e.PendingTokens, maxTokens)
		l.Running, c[3] = clamp(e.Running, maxReqs)
		clamped = clamped || c[0] || c[1] || c[2] || c[3]
		load[e.Instance] = l
	}
	return load, clamped, nil
}

// clamp returns min(v, limit) as an int and whether it cut v.
func clamp(v uint64, limit int) (int, bool) {
	if v > uint64(limit) {
		return limit, true
	}
	return int(v), false
}

// appendLoad appends the positional encoding of l, one value of the
// legacy load hash T:load:<replica>: four uvarints (queued, queued tokens,
// pending tokens, running). Negative values encode as 0. Replicas before
// ReplicaState read only this; it is still written for them (see the
// package doc, Load) and read from them.
func appendLoad(dst []byte, l scheduler.Load) []byte {
	for _, v := range [...]int{l.Queued, l.QueuedTokens, l.PendingTokens, l.Running} {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	return dst
}

// decodeLoad decodes appendLoad's encoding, clamping as decodeState does.
// Trailing bytes are ignored.
func decodeLoad(s string, maxReqs, maxTokens int) (l scheduler.Load, clamped bool, err error) {
	var v [4]int
	for i := range v {
		x, n := binary.Uvarint([]byte(s))
		if n <= 0 {
			return scheduler.Load{}, false, fmt.Errorf("%w: field %d of %q", errBadLoad, i, s)
		}
		limit := maxTokens
		if i == 0 || i == 3 {
			limit = maxReqs
		}
		var c bool
		v[i], c = clamp(x, limit)
		clamped = clamped || c
		s = s[n:]
	}
	return scheduler.Load{Queued: v[0], QueuedTokens: v[1], PendingTokens: v[2], Running: v[3]}, clamped, nil
}

// encodeKeyDepth encodes the leader's table.
func encodeKeyDepth(splits []uint64, version int64, leader string) ([]byte, error) {
	b, err := proto.Marshal(&statepb.KeyDepth{Splits: splits, Version: version, Leader: leader})
	if err != nil {
		return nil, fmt.Errorf("state: encode key depth: %w", err)
	}
	return b, nil
}

// decodeKeyDepth decodes T:kd.
func decodeKeyDepth(data string) (*statepb.KeyDepth, error) {
	kd := &statepb.KeyDepth{}
	if err := proto.Unmarshal([]byte(data), kd); err != nil {
		return nil, fmt.Errorf("state: decode key depth: %w", err)
	}
	return kd, nil
}
