package state

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/proto/statepb"
	"github.com/dualmap/dualmap/scheduler"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestLoadEncoding(t *testing.T) {
	tests := []struct {
		name    string
		in      scheduler.Load
		want    scheduler.Load
		clamped bool
	}{
		{"zero", scheduler.Load{}, scheduler.Load{}, false},
		{"all fields", scheduler.Load{Queued: 1, QueuedTokens: 300, PendingTokens: 900, Running: 7}, scheduler.Load{Queued: 1, QueuedTokens: 300, PendingTokens: 900, Running: 7}, false},
		{"negative encodes as zero", scheduler.Load{Queued: -1, Running: 2}, scheduler.Load{Running: 2}, false},
		{"at the bounds", scheduler.Load{Queued: 100, QueuedTokens: 1000, PendingTokens: 1000, Running: 100}, scheduler.Load{Queued: 100, QueuedTokens: 1000, PendingTokens: 1000, Running: 100}, false},
		{"requests clamped", scheduler.Load{Queued: 101, Running: 1 << 40}, scheduler.Load{Queued: 100, Running: 100}, true},
		{"tokens clamped", scheduler.Load{QueuedTokens: 1001, PendingTokens: 1 << 62}, scheduler.Load{QueuedTokens: 1000, PendingTokens: 1000}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clamped, err := decodeLoad(string(appendLoad(nil, tt.in)), 100, 1000)
			if err != nil || got != tt.want || clamped != tt.clamped {
				t.Errorf("decodeLoad(appendLoad(%+v)) = %+v, %v, %v; want %+v, %v, nil", tt.in, got, clamped, err, tt.want, tt.clamped)
			}
		})
	}
	if got := len(appendLoad(nil, scheduler.Load{Queued: 1, Running: 3})); got != 4 {
		t.Errorf("len(appendLoad(small)) = %d bytes, want 4", got)
	}
	// Later versions may append fields.
	if got, _, err := decodeLoad(string(append(appendLoad(nil, scheduler.Load{Running: 5}), 9, 9)), 100, 1000); err != nil || got.Running != 5 {
		t.Errorf("decodeLoad(with trailing fields) = %+v, %v; want Running 5", got, err)
	}
	for _, bad := range []string{"", "\x01\x02", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		if _, _, err := decodeLoad(bad, 100, 1000); !errors.Is(err, errBadLoad) {
			t.Errorf("decodeLoad(%q) error = %v, want errBadLoad", bad, err)
		}
	}
}

func TestEncodeBatches(t *testing.T) {
	big := make([]uint64, maxEntryBlocks-1)
	tests := []struct {
		name    string
		recs    []record
		entries []int // dispatches per entry
	}{
		{"empty", nil, nil},
		{"one entry", []record{{"a", []uint64{1, 2}}, {"b", []uint64{3}}}, []int{2}},
		{"split when over maxEntryBlocks", []record{{"a", big}, {"b", []uint64{1, 2}}, {"c", []uint64{3}}}, []int{1, 2}},
		{"an oversized record gets its own entry", []record{{"a", []uint64{1}}, {"b", make([]uint64, maxEntryBlocks+1)}}, []int{1, 1}},
	}
	at := time.Unix(1_700_000_000, 5)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := encodeBatches("r1", tt.recs, at)
			if err != nil {
				t.Fatalf("encodeBatches() error = %v", err)
			}
			if len(out) != len(tt.entries) {
				t.Fatalf("encodeBatches() = %d entries, want %d", len(out), len(tt.entries))
			}
			var all []record
			for i, e := range out {
				var msg statepb.DispatchBatch
				if err := decodeBatch(string(e), &msg); err != nil {
					t.Fatalf("decodeBatch(entry %d) error = %v", i, err)
				}
				if msg.Replica != "r1" || msg.UnixNanos != at.UnixNano() || len(msg.Dispatches) != tt.entries[i] {
					t.Errorf("entry %d = replica %q, unix_nanos %d, %d dispatches; want r1, %d, %d", i, msg.Replica, msg.UnixNanos, len(msg.Dispatches), at.UnixNano(), tt.entries[i])
				}
				for _, d := range msg.Dispatches {
					all = append(all, record{d.Instance, d.Blocks})
				}
			}
			if !slices.EqualFunc(all, tt.recs, func(x, y record) bool {
				return x.instance == y.instance && slices.Equal(x.blocks, y.blocks)
			}) {
				t.Errorf("decoded records differ from the encoded ones")
			}
		})
	}
}

// TestWireFormat pins the encoding to proto/state.proto by decoding with
// the low-level wire reader: field numbers and packed fixed64 blocks.
func TestWireFormat(t *testing.T) {
	out, err := encodeBatches("r", []record{{"i", []uint64{1, 2}}}, time.Unix(0, 9))
	if err != nil {
		t.Fatal(err)
	}
	want := protowire.AppendTag(nil, 1, protowire.BytesType)
	want = protowire.AppendString(want, "r")
	var d []byte
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendString(d, "i")
	var packed []byte
	packed = protowire.AppendFixed64(packed, 1)
	packed = protowire.AppendFixed64(packed, 2)
	d = protowire.AppendTag(d, 2, protowire.BytesType)
	d = protowire.AppendBytes(d, packed)
	want = protowire.AppendTag(want, 2, protowire.BytesType)
	want = protowire.AppendBytes(want, d)
	want = protowire.AppendTag(want, 3, protowire.VarintType)
	want = protowire.AppendVarint(want, 9)
	if got := out[0]; !slices.Equal(got, want) {
		t.Errorf("encodeBatches() = %x, want %x", got, want)
	}
}

func TestKeyDepthEncoding(t *testing.T) {
	b, err := encodeKeyDepth([]uint64{1, 1 << 63}, 7, "r2")
	if err != nil {
		t.Fatal(err)
	}
	kd, err := decodeKeyDepth(string(b))
	if err != nil || !slices.Equal(kd.Splits, []uint64{1, 1 << 63}) || kd.Version != 7 || kd.Leader != "r2" {
		t.Errorf("decodeKeyDepth() = %v, %v; want splits [1 2^63], version 7, leader r2", kd, err)
	}
	if _, err := decodeKeyDepth("\xff"); err == nil {
		t.Error("decodeKeyDepth(garbage) error = nil")
	}
}

func TestStateEncoding(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]scheduler.Load
		want    map[string]scheduler.Load
		clamped bool
	}{
		{"empty", map[string]scheduler.Load{}, map[string]scheduler.Load{}, false},
		{"all fields", map[string]scheduler.Load{"a:1": {Queued: 1, QueuedTokens: 300, PendingTokens: 900, Running: 7}, "b:2": {}},
			map[string]scheduler.Load{"a:1": {Queued: 1, QueuedTokens: 300, PendingTokens: 900, Running: 7}, "b:2": {}}, false},
		{"negative encodes as zero", map[string]scheduler.Load{"a": {Queued: -1, Running: 2}}, map[string]scheduler.Load{"a": {Running: 2}}, false},
		{"at the bounds", map[string]scheduler.Load{"a": {Queued: 100, QueuedTokens: 1000, PendingTokens: 1000, Running: 100}},
			map[string]scheduler.Load{"a": {Queued: 100, QueuedTokens: 1000, PendingTokens: 1000, Running: 100}}, false},
		{"requests clamped", map[string]scheduler.Load{"a": {Queued: 101, Running: 1 << 40}}, map[string]scheduler.Load{"a": {Queued: 100, Running: 100}}, true},
		{"tokens clamped", map[string]scheduler.Load{"a": {QueuedTokens: 1001, PendingTokens: 1 << 62}}, map[string]scheduler.Load{"a": {QueuedTokens: 1000, PendingTokens: 1000}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeState(tt.in)
			if err != nil {
				t.Fatalf("encodeState() error = %v", err)
			}
			got, clamped, err := decodeState(string(b), 100, 1000)
			if err != nil || !maps.Equal(got, tt.want) || clamped != tt.clamped {
				t.Errorf("decodeState(encodeState(%+v)) = %+v, %v, %v; want %+v, %v, nil", tt.in, got, clamped, err, tt.want, tt.clamped)
			}
		})
	}
}

func TestStateMalformed(t *testing.T) {
	entry := func(instance string, running uint64) []byte {
		var e []byte
		if instance != "" {
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, instance)
		}
		e = protowire.AppendTag(e, 5, protowire.VarintType)
		e = protowire.AppendVarint(e, running)
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(b, e)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"not protobuf", []byte("\xff\xff\xff")},
		{"truncated", entry("a", 1)[:4]},
		{"an entry without instance", entry("", 1)},
		{"an instance twice", append(entry("a", 1), entry("a", 2)...)},
		{"invalid UTF-8 in the instance", entry("\xff", 1)},
		{"the legacy encoding", []byte("\x01\x02\x03\x04")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _, err := decodeState(string(tt.data), 100, 1000); !errors.Is(err, errBadLoad) {
				t.Errorf("decodeState(%x) = %v, %v; want errBadLoad", tt.data, got, err)
			}
		})
	}
	// Fields a later version adds are ignored, in the message and in an
	// entry.
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, "a")
	e = protowire.AppendTag(e, 5, protowire.VarintType)
	e = protowire.AppendVarint(e, 3)
	e = protowire.AppendTag(e, 6, protowire.VarintType) // unknown in an entry
	e = protowire.AppendVarint(e, 9)
	later := protowire.AppendTag(nil, 1, protowire.BytesType)
	later = protowire.AppendBytes(later, e)
	later = protowire.AppendTag(later, 2, protowire.BytesType) // unknown in the message
	later = protowire.AppendString(later, "something new")
	got, _, err := decodeState(string(later), 100, 1000)
	if err != nil || got["a"] != (scheduler.Load{Running: 3}) {
		t.Errorf("decodeState(with later fields) = %+v, %v; want a: Running 3", got, err)
	}
}

// TestStateWireFormat pins ReplicaState to proto/state.proto with the
// low-level wire reader: field numbers and types.
func TestStateWireFormat(t *testing.T) {
	b, err := encodeState(map[string]scheduler.Load{"i": {Queued: 1, QueuedTokens: 2, PendingTokens: 3, Running: 4}})
	if err != nil {
		t.Fatal(err)
	}
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, "i")
	for f, v := range []uint64{1, 2, 3, 4} {
		e = protowire.AppendTag(e, protowire.Number(f+2), protowire.VarintType)
		e = protowire.AppendVarint(e, v)
	}
	want := protowire.AppendTag(nil, 1, protowire.BytesType)
	want = protowire.AppendBytes(want, e)
	if !slices.Equal(b, want) {
		t.Errorf("encodeState() = %x, want %x", b, want)
	}
}

// FuzzDecodeState: whatever T:state holds, decodeState returns an error
// or loads within the bounds, and what it returns encodes back to the
// same loads.
func FuzzDecodeState(f *testing.F) {
	for _, l := range []map[string]scheduler.Load{{}, {"a:1": {Queued: 1, QueuedTokens: 2, PendingTokens: 3, Running: 4}}, {"x": {Running: 1 << 40}, "y": {}}} {
		b, err := encodeState(l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x01\x02\x03\x04"))
	f.Add([]byte("\x0a\x03\x0a\x01a\x0a\x03\x0a\x01a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxReqs, maxTokens = 100, 1000
		got, _, err := decodeState(string(data), maxReqs, maxTokens)
		if err != nil {
			if !errors.Is(err, errBadLoad) {
				t.Fatalf("decodeState() error = %v, want errBadLoad", err)
			}
			return
		}
		for id, l := range got {
			if id == "" || l.Queued < 0 || l.Queued > maxReqs || l.Running < 0 || l.Running > maxReqs ||
				l.QueuedTokens < 0 || l.QueuedTokens > maxTokens || l.PendingTokens < 0 || l.PendingTokens > maxTokens {
				t.Fatalf("decodeState() = %q: %+v, outside the bounds", id, l)
			}
		}
		b, err := encodeState(got)
		if err != nil {
			t.Fatalf("encodeState(decoded) error = %v", err)
		}
		again, clamped, err := decodeState(string(b), maxReqs, maxTokens)
		if err != nil || clamped || !maps.Equal(again, got) {
			t.Fatalf("decodeState(encodeState(%+v)) = %+v, %v, %v", got, again, clamped, err)
		}
	})
}

// FuzzDecodeLoad: the legacy values never crash the decoder and stay
// within the bounds.
func FuzzDecodeLoad(f *testing.F) {
	f.Add(string(appendLoad(nil, scheduler.Load{Queued: 1, QueuedTokens: 2, PendingTokens: 3, Running: 4})))
	f.Add("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
	f.Fuzz(func(t *testing.T, s string) {
		l, _, err := decodeLoad(s, 100, 1000)
		if err != nil {
			return
		}
		if l.Queued < 0 || l.Queued > 100 || l.Running < 0 || l.Running > 100 ||
			l.QueuedTokens < 0 || l.QueuedTokens > 1000 || l.PendingTokens < 0 || l.PendingTokens > 1000 {
			t.Fatalf("decodeLoad(%q) = %+v, outside the bounds", s, l)
		}
	})
}
