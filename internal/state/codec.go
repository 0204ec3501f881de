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

// errBadLoad marks a load hash value that does not decode.
var errBadLoad = errors.New("state: malformed load value")

// appendLoad appends the compact encoding of l: four uvarints (queued,
// queued tokens, pending tokens, running). Negative values encode as 0.
func appendLoad(dst []byte, l scheduler.Load) []byte {
	for _, v := range [...]int{l.Queued, l.QueuedTokens, l.PendingTokens, l.Running} {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	return dst
}

// decodeLoad decodes appendLoad's encoding, clamping the request counts
// (queued, running) to maxReqs and the token counts to maxTokens; clamped
// says whether it did. Trailing bytes are ignored, so later versions may
// append fields.
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
		if x > uint64(limit) {
			x, clamped = uint64(limit), true
		}
		v[i] = int(x)
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
