package kvevents

import (
	"errors"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// pack encodes v with an independent MessagePack implementation, so that
// the decoder is not only tested against this package's own encoder.
func pack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toks(n int, base uint32) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

func u32s(n int, base uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

const big = uint64(1)<<63 + 12345 // vLLM's hashes go above 2^63

// got is what a test compares: the events without the decoder's slices'
// capacities.
type got struct {
	Kind      Kind
	Hashes    []uint64
	Parent    uint64
	HasParent bool
	Tokens    []uint32
	BlockSize int
	Medium    Medium
	Group     int
	Keyable   int
}

func viewOf(b Batch) []got {
	var out []got
	for _, e := range b.Events {
		g := got{e.Kind, append([]uint64(nil), e.Hashes...), e.Parent, e.HasParent, append([]uint32(nil), e.Tokens...), e.BlockSize, e.Medium, e.Group, e.Keyable}
		if len(g.Hashes) == 0 {
			g.Hashes = nil
		}
		if len(g.Tokens) == 0 {
			g.Tokens = nil
		}
		out = append(out, g)
	}
	return out
}

func TestDecodeVariants(t *testing.T) {
	stored := func(hs []uint64, parent uint64, hasParent bool, bs int, keyable int) got {
		return got{Kind: BlockStored, Hashes: hs, Parent: parent, HasParent: hasParent, Tokens: u32s(len(hs)*bs, 100), BlockSize: bs, Keyable: keyable}
	}
	tests := []struct {
		name     string
		batch    any
		want     []got
		rank     int
		skipped  int
		wantedTS float64
	}{
		{
			name: "vllm arrays, trailing fields absent",
			batch: []any{1.5, []any{
				[]any{"BlockStored", []any{uint64(7), big}, nil, toks(8, 100), 4, nil, "GPU"},
			}, nil},
			want: []got{stored([]uint64{7, big}, 0, false, 4, 2)}, rank: -1, wantedTS: 1.5,
		},
		{
			name: "vllm arrays, every field and more",
			batch: []any{2.0, []any{
				[]any{"BlockStored", []any{uint64(9)}, uint64(7), toks(4, 100), 4, nil, "GPU", nil, nil, 0, "full_attention", nil, "local", "owned", "sess"},
				[]any{"BlockRemoved", []any{uint64(9), big}, "GPU", nil},
				[]any{"AllBlocksCleared"},
			}, 0},
			want: []got{
				stored([]uint64{9}, 7, true, 4, 1),
				{Kind: BlockRemoved, Hashes: []uint64{9, big}, Keyable: 2},
				{Kind: AllBlocksCleared},
			},
			rank: 0, wantedTS: 2,
		},
		{
			name: "vllm maps with unknown keys",
			batch: []any{3.0, []any{
				map[string]any{"type": "BlockStored", "block_hashes": []any{big}, "parent_block_hash": nil, "token_ids": toks(16, 100), "block_size": 16, "medium": "GPU", "group_idx": nil, "locality": "x", "ownership": map[string]any{"a": []any{1, 2}}},
				map[string]any{"type": "BlockRemoved", "block_hashes": []any{big}, "medium": "CPU"},
			}, 1},
			want: []got{
				stored([]uint64{big}, 0, false, 16, 1),
				{Kind: BlockRemoved, Hashes: []uint64{big}, Medium: CPU, Keyable: 1},
			},
			rank: 1, wantedTS: 3,
		},
		{
			name: "signed hashes (sglang, old vllm)",
			batch: []any{4.0, []any{
				map[string]any{"type": "BlockStored", "block_hashes": []any{int64(-5), int64(6)}, "parent_block_hash": int64(-9), "token_ids": toks(4, 100), "block_size": 2},
			}, 3},
			want: []got{stored([]uint64{uint64(1<<64 - 5), 6}, uint64(1<<64-9), true, 2, 2)}, rank: 3, wantedTS: 4,
		},
		{
			name: "byte hashes",
			batch: []any{5.0, []any{
				[]any{"BlockStored", []any{[]byte{1, 2, 3}}, nil, toks(2, 100), 2},
			}, nil},
			want: []got{stored([]uint64{bytesHash([]byte{1, 2, 3})}, 0, false, 2, 1)}, rank: -1, wantedTS: 5,
		},
		{
			name: "sglang cache_salt map where lora_name is",
			batch: []any{6.0, []any{
				[]any{"BlockStored", []any{uint64(1)}, nil, toks(2, 100), 2, nil, "GPU", map[string]any{"cache_salt": "s"}},
				[]any{"BlockStored", []any{uint64(2)}, nil, toks(2, 100), 2, nil, "GPU", map[string]any{"cache_salt": nil}},
			}, 0},
			want: []got{stored([]uint64{1}, 0, false, 2, 0), stored([]uint64{2}, 0, false, 2, 1)}, rank: 0, wantedTS: 6,
		},
		{
			name: "lora and extra keys",
			batch: []any{7.0, []any{
				[]any{"BlockStored", []any{uint64(1)}, nil, toks(2, 100), 2, 3},
				[]any{"BlockStored", []any{uint64(1), uint64(2), uint64(3)}, nil, toks(6, 100), 2, nil, "GPU", nil, []any{nil, []any{"mm", 0}, nil}},
				map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(4)}, "token_ids": toks(2, 100), "block_size": 2, "lora_name": "adapter"},
			}, nil},
			want: []got{stored([]uint64{1}, 0, false, 2, 0), stored([]uint64{1, 2, 3}, 0, false, 2, 1), stored([]uint64{4}, 0, false, 2, 0)},
			rank: -1, wantedTS: 7,
		},
		{
			name: "sglang media",
			batch: []any{8.0, []any{
				map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}, "medium": "CPU_PINNED"},
				map[string]any{"type": "BlockRemoved", "block_hashes": []any{2}, "medium": "DISK"},
				map[string]any{"type": "BlockRemoved", "block_hashes": []any{3}, "medium": "CPU_TIER2", "group_idx": 1},
			}, 0},
			want: []got{
				{Kind: BlockRemoved, Hashes: []uint64{1}, Medium: CPU, Keyable: 1},
				{Kind: BlockRemoved, Hashes: []uint64{2}, Medium: Other, Keyable: 1},
				{Kind: BlockRemoved, Hashes: []uint64{3}, Medium: Other, Group: 1, Keyable: 1},
			},
			rank: 0, wantedTS: 8,
		},
		{
			name: "unknown and unusable events skipped, the batch kept",
			batch: []any{9.0, []any{
				[]any{"KVCacheMoved", 1, 2},
				map[string]any{"type": "Future", "x": 1},
				[]any{"BlockStored", "not a list", nil, toks(2, 100), 2},
				[]any{"BlockStored", []any{1}, nil, toks(3, 100), 2}, // tokens do not fill the block
				[]any{"BlockStored", []any{1}, nil, []any{-1, 2}, 2}, // no token id
				[]any{},
				"not an event",
				[]any{"BlockRemoved", []any{uint64(5)}},
			}, 0, "trailing", map[string]any{"x": 1}},
			want: []got{{Kind: BlockRemoved, Hashes: []uint64{5}, Keyable: 1}},
			rank: 0, skipped: 7, wantedTS: 9,
		},
		{
			name:  "batch as a map with sglang's rank key",
			batch: map[string]any{"ts": 10.0, "events": []any{[]any{"AllBlocksCleared"}}, "attn_dp_rank": 2, "other": 1},
			want:  []got{{Kind: AllBlocksCleared}}, rank: 2, wantedTS: 10,
		},
		{
			name: "block size left out",
			batch: []any{11, []any{
				map[string]any{"type": "BlockStored", "block_hashes": []any{1, 2}, "token_ids": toks(8, 100)},
			}},
			want: []got{stored([]uint64{1, 2}, 0, false, 4, 2)}, rank: -1, wantedTS: 11,
		},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := d.Decode(pack(t, tt.batch))
			if err != nil {
				t.Fatalf("Decode() error %v", err)
			}
			if g := viewOf(b); !reflect.DeepEqual(g, tt.want) {
				t.Errorf("Decode() events =\n%+v\nwant\n%+v", g, tt.want)
			}
			if b.Rank != tt.rank || b.Skipped != tt.skipped || b.TS != tt.wantedTS {
				t.Errorf("Decode() rank, skipped, ts = %d, %d, %g, want %d, %d, %g", b.Rank, b.Skipped, b.TS, tt.rank, tt.skipped, tt.wantedTS)
			}
		})
	}
}

func bytesHash(b []byte) uint64 {
	r := reader{b: append([]byte{0xc4, byte(len(b))}, b...)}
	h, _ := hashValue(&r)
	return h
}

func TestDecodeErrors(t *testing.T) {
	ok := pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, toks(2, 1), 2}}, nil})
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"truncated", ok[:len(ok)-3]},
		{"trailing bytes", append(append([]byte(nil), ok...), 0x01)},
		{"not a batch", pack(t, "hello")},
		{"events not a list", pack(t, []any{1.0, "x", nil})},
		{"array length beyond the frame", []byte{0x93, 0x01, 0xdd, 0x7f, 0xff, 0xff, 0xff}},
		{"map length beyond the frame", []byte{0xdf, 0x7f, 0xff, 0xff, 0xff, 0x00}},
		{"string length beyond the frame", []byte{0x93, 0x01, 0x91, 0x91, 0xdb, 0x7f, 0xff, 0xff, 0xff}},
		{"reserved byte", []byte{0x93, 0xc1, 0x90, 0xc0}},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Decode(tt.payload); !errors.Is(err, ErrFrame) {
				t.Errorf("Decode() error = %v, want ErrFrame", err)
			}
		})
	}
}

// TestEncoderRoundTrip: what the test publisher writes decodes to what it
// was given, in both encodings, and an independent decoder reads it as the
// documented shape.
func TestEncoderRoundTrip(t *testing.T) {
	events := []Event{
		{Kind: BlockStored, Hashes: []uint64{big, 3}, Tokens: u32s(8, 7), BlockSize: 4},
		{Kind: BlockStored, Hashes: []uint64{4}, Parent: 3, HasParent: true, Tokens: u32s(4, 70000), BlockSize: 4},
		{Kind: BlockRemoved, Hashes: []uint64{big}},
		{Kind: AllBlocksCleared},
	}
	want := []got{
		{Kind: BlockStored, Hashes: []uint64{big, 3}, Tokens: u32s(8, 7), BlockSize: 4, Keyable: 2},
		{Kind: BlockStored, Hashes: []uint64{4}, Parent: 3, HasParent: true, Tokens: u32s(4, 70000), BlockSize: 4, Keyable: 1},
		{Kind: BlockRemoved, Hashes: []uint64{big}, Keyable: 1},
		{Kind: AllBlocksCleared},
	}
	for _, enc := range []Encoding{Arrays, Maps} {
		p := Encoder{Encoding: enc}.Payload(nil, 12.5, events, 2)
		var d Decoder
		b, err := d.Decode(p)
		if err != nil {
			t.Fatalf("encoding %d: Decode() error %v", enc, err)
		}
		if g := viewOf(b); !reflect.DeepEqual(g, want) || b.Rank != 2 || b.TS != 12.5 {
			t.Errorf("encoding %d: Decode() = %+v rank %d, want %+v rank 2", enc, g, b.Rank, want)
		}
		var generic []any
		if err := msgpack.Unmarshal(p, &generic); err != nil {
			t.Fatalf("encoding %d: independent decoder: %v", enc, err)
		}
		evs := generic[1].([]any)
		switch enc {
		case Arrays:
			e0 := evs[0].([]any)
			if e0[0] != "BlockStored" || e0[1].([]any)[0] != big || e0[4] != int8(4) && e0[4] != uint8(4) {
				t.Errorf("arrays: first event %v", e0)
			}
		case Maps:
			e0 := evs[0].(map[string]any)
			if e0["type"] != "BlockStored" || e0["block_hashes"].([]any)[0] != big || e0["parent_block_hash"] != nil {
				t.Errorf("maps: first event %v", e0)
			}
		}
	}
}

// TestDecodeNoAllocs: once its buffers have grown, the decoder allocates
// nothing per batch.
func TestDecodeNoAllocs(t *testing.T) {
	events := []Event{{Kind: BlockStored, Hashes: []uint64{1, 2, 3, 4}, Tokens: u32s(64, 1), BlockSize: 16}, {Kind: BlockRemoved, Hashes: []uint64{1}}}
	p := Encoder{Encoding: Maps}.Payload(nil, 1, events, 0)
	var d Decoder
	if _, err := d.Decode(p); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(p) }); n != 0 {
		t.Errorf("Decode() allocates %g times per batch, want 0", n)
	}
}

func TestSplit(t *testing.T) {
	seq := AppendSeq(nil, 41)
	if m, err := SplitLive([][]byte{[]byte("kv@a"), seq, {0x90}}); err != nil || m.Seq != 41 || string(m.Topic) != "kv@a" {
		t.Errorf("SplitLive() = %+v, %v", m, err)
	}
	if _, err := SplitLive([][]byte{[]byte("t"), {1, 2}, {0x90}}); !errors.Is(err, ErrFrame) {
		t.Errorf("SplitLive(short seq) error = %v, want ErrFrame", err)
	}
	for _, frames := range [][][]byte{{{}, []byte("t"), seq, {0x90}}, {{}, seq, {0x90}}} {
		if m, err := SplitReplay(frames); err != nil || m.Seq != 41 {
			t.Errorf("SplitReplay(%d frames) = %+v, %v", len(frames), m, err)
		}
	}
	if m, err := SplitReplay([][]byte{{}, AppendSeq(nil, -1), {}}); err != nil || m.Seq != -1 {
		t.Errorf("SplitReplay(end) = %+v, %v", m, err)
	}
}
