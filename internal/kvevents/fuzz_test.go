package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzFrames feeds raw messages (topic, sequence and payload frames) to
// the splitter and the decoder: any input returns a batch or an error,
// never a panic, and a decoded batch's slices stay within what the
// payload could hold.
func FuzzFrames(f *testing.F) {
	events := []Event{
		{Kind: BlockStored, Hashes: []uint64{big, 3}, Tokens: u32s(8, 7), BlockSize: 4},
		{Kind: BlockStored, Hashes: []uint64{4}, Parent: 3, HasParent: true, Tokens: u32s(4, 9), BlockSize: 4},
		{Kind: BlockRemoved, Hashes: []uint64{big}},
		{Kind: AllBlocksCleared},
	}
	for _, enc := range []Encoding{Arrays, Maps} {
		f.Add([]byte("kv@10.0.0.1:8000@m"), AppendSeq(nil, 7), Encoder{Encoding: enc}.Payload(nil, 1, events, 0))
	}
	f.Add([]byte{}, []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0x93, 0xc0, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("t"), []byte{1}, []byte{0x81, 0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x90})
	var d Decoder
	f.Fuzz(func(t *testing.T, topic, seq, payload []byte) {
		m, err := SplitLive([][]byte{topic, seq, payload})
		if err != nil {
			return
		}
		b, err := d.Decode(m.Payload)
		if err != nil {
			return
		}
		n := 0
		for _, e := range b.Events {
			n += len(e.Hashes) + len(e.Tokens)
			if e.Kind == BlockStored && len(e.Tokens) != len(e.Hashes)*e.BlockSize {
				t.Fatalf("stored event with %d tokens for %d blocks of %d", len(e.Tokens), len(e.Hashes), e.BlockSize)
			}
			if e.Keyable < 0 || e.Keyable > len(e.Hashes) {
				t.Fatalf("keyable %d of %d blocks", e.Keyable, len(e.Hashes))
			}
		}
		if n > len(payload) {
			t.Fatalf("%d hashes and tokens from a payload of %d bytes", n, len(payload))
		}
	})
}

// FuzzZMTP feeds a raw inbound byte stream (after the handshake) to the
// subscriber's ZMTP reader: every message it returns is within the
// bounds, and any input ends in an error, never a panic.
func FuzzZMTP(f *testing.F) {
	f.Add([]byte{flagMore, 1, 't', flagMore, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0x90})
	f.Add([]byte{flagCommand, 5, 4, 'P', 'I', 'N', 'G', 0, 0})
	f.Add(binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<40))
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &zconn{r: bufio.NewReader(bytes.NewReader(data))}
		for range 100 {
			frames, err := z.recv()
			if err != nil {
				return
			}
			n := 0
			for _, fr := range frames {
				n += len(fr)
			}
			if len(frames) > maxWireFrames || n > maxWireMessage {
				t.Fatalf("a message of %d frames, %d bytes", len(frames), n)
			}
		}
	})
}
