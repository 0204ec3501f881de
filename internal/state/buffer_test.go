package state

import (
	"slices"
	"testing"
	"time"
)

func fixedNow() time.Time { return time.Unix(1_700_000_000, 0) }

func TestBuffer(t *testing.T) {
	type add struct {
		instance string
		blocks   []uint64
	}
	tests := []struct {
		name      string
		limit     int
		adds      []add
		want      []record
		coalesced uint64
		dropped   uint64
	}{
		{
			name:  "keeps order",
			limit: 100,
			adds:  []add{{"a", []uint64{1, 2}}, {"b", []uint64{1}}},
			want:  []record{{"a", []uint64{1, 2}}, {"b", []uint64{1}}},
		},
		{
			name:      "coalesces identical records",
			limit:     100,
			adds:      []add{{"a", []uint64{1, 2}}, {"a", []uint64{1, 2}}, {"b", []uint64{1, 2}}, {"a", []uint64{1}}},
			want:      []record{{"a", []uint64{1, 2}}, {"b", []uint64{1, 2}}, {"a", []uint64{1}}},
			coalesced: 1,
		},
		{
			name:    "drops the oldest when full",
			limit:   7, // each record of 2 blocks costs 3
			adds:    []add{{"a", []uint64{1, 2}}, {"b", []uint64{3, 4}}, {"c", []uint64{5, 6}}},
			want:    []record{{"b", []uint64{3, 4}}, {"c", []uint64{5, 6}}},
			dropped: 1,
		},
		{
			name:  "a dropped record no longer coalesces",
			limit: 3,
			adds:  []add{{"a", []uint64{1, 2}}, {"b", []uint64{3, 4}}, {"a", []uint64{1, 2}}},
			want:  []record{{"a", []uint64{1, 2}}},
			// b pushed a out, then a pushed b out.
			dropped: 2,
		},
		{
			name:  "a record costing the whole buffer fits",
			limit: 4, // 3 blocks cost 4
			adds:  []add{{"a", []uint64{1, 2, 3}}},
			want:  []record{{"a", []uint64{1, 2, 3}}},
		},
		{
			name:  "truncates a record of as many blocks as the buffer",
			limit: 4,
			adds:  []add{{"a", []uint64{1, 2, 3, 4}}},
			want:  []record{{"a", []uint64{1, 2, 3}}},
		},
		{
			name:  "truncates a record larger than the buffer",
			limit: 4,
			adds:  []add{{"a", []uint64{1, 2, 3, 4, 5, 6}}},
			want:  []record{{"a", []uint64{1, 2, 3}}},
		},
		{
			name:    "ignores empty and invalid records",
			limit:   100,
			adds:    []add{{"", []uint64{1}}, {"a", nil}, {"\xff", []uint64{1}}},
			want:    nil,
			dropped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st counters
			b := newBuffer(tt.limit, &st)
			for _, a := range tt.adds {
				b.add(a.instance, a.blocks, fixedNow)
			}
			if got := b.len(); got != len(tt.want) {
				t.Errorf("len() = %d, want %d", got, len(tt.want))
			}
			got, oldest := b.take()
			if !slices.EqualFunc(got, tt.want, func(x, y record) bool {
				return x.instance == y.instance && slices.Equal(x.blocks, y.blocks)
			}) {
				t.Errorf("take() = %v, want %v", got, tt.want)
			}
			if len(got) > 0 && !oldest.Equal(fixedNow()) {
				t.Errorf("take() oldest = %v, want %v", oldest, fixedNow())
			}
			if c, d := st.coalesced.Load(), st.dropped.Load(); c != tt.coalesced || d != tt.dropped {
				t.Errorf("coalesced, dropped = %d, %d; want %d, %d", c, d, tt.coalesced, tt.dropped)
			}
			if got, _ := b.take(); got != nil {
				t.Errorf("second take() = %v, want nil", got)
			}
		})
	}
}

func TestBufferCopiesBlocks(t *testing.T) {
	var st counters
	b := newBuffer(100, &st)
	p := []uint64{1, 2, 3}
	b.add("a", p, fixedNow)
	p[0] = 99
	got, _ := b.take()
	if want := []uint64{1, 2, 3}; !slices.Equal(got[0].blocks, want) {
		t.Errorf("take()[0].blocks = %v after the caller changed its slice, want %v", got[0].blocks, want)
	}
}

// TestPublisherTrim: records that wait for Redis are bounded like the
// buffer, oldest dropped first.
func TestPublisherTrim(t *testing.T) {
	var st counters
	p := publisher{pending: []record{{"a", []uint64{1}}, {"b", []uint64{2}}, {"c", []uint64{3}}}, cost: 6}
	p.trim(4, &st)
	if len(p.pending) != 2 || p.pending[0].instance != "b" || p.cost != 4 {
		t.Errorf("trim(4) left %v with cost %d, want [b c] with cost 4", p.pending, p.cost)
	}
	if got := st.dropped.Load(); got != 1 {
		t.Errorf("dropped = %d, want 1", got)
	}
	if got := p.waiting.Load(); got != 2 {
		t.Errorf("waiting = %d, want 2", got)
	}
}

func BenchmarkBufferAdd(b *testing.B) {
	var st counters
	buf := newBuffer(1<<30, &st)
	p := testPrompt(1, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p[15] = uint64(i)
		buf.add("10.0.0.1:8000", p, time.Now)
		if i%1000 == 999 {
			buf.take()
		}
	}
}
