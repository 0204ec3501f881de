package kvevents

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dualmap/dualmap/scheduler"
)

// schedTarget feeds a real scheduler, as the pool does.
type schedTarget struct{ s *scheduler.Scheduler }

func (t schedTarget) Stored(id string, keys []uint64)  { _ = t.s.AddCached(id, keys) }
func (t schedTarget) Removed(id string, keys []uint64) { _ = t.s.RemoveCached(id, keys) }
func (t schedTarget) Cleared(id string)                { _ = t.s.ClearCached(id) }
func (t schedTarget) SetExact(id string, v bool)       { _ = t.s.SetExact(id, v) }

func newSched(b *testing.B, capacityBlocks int) *scheduler.Scheduler {
	cfg := scheduler.DefaultConfig()
	cfg.BlockSize, cfg.CacheTokens = 16, capacityBlocks*16
	s, err := scheduler.New(cfg, []scheduler.Instance{{ID: "10.0.0.1:8000"}})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// ingestPayloads are n batches of perBatch stored events, each a chain of
// blocksPerEvent blocks continuing the previous event's chain, then the
// same blocks removed: a steady state of stores and evictions.
func ingestPayloads(enc Encoding, n, perBatch, blocksPerEvent int) [][]byte {
	var out [][]byte
	var h uint64 = 1
	tok := uint32(0)
	for range n {
		var evs, rm []Event
		for range perBatch {
			e := Event{Kind: BlockStored, BlockSize: 16}
			for range blocksPerEvent {
				e.Hashes = append(e.Hashes, h)
				for range 16 {
					e.Tokens = append(e.Tokens, tok)
					tok++
				}
				h++
			}
			evs = append(evs, e)
			rm = append(rm, Event{Kind: BlockRemoved, Hashes: e.Hashes})
		}
		out = append(out, Encoder{Encoding: enc}.Payload(nil, 1, evs, 0), Encoder{Encoding: enc}.Payload(nil, 1, rm, 0))
	}
	return out
}

// BenchmarkIngest is the subscriber's work per block event once a message
// is read: decode, key by the router's hash of the tokens, apply to a real
// scheduler's index. ns/op is per block event (a store or a removal); the
// events_per_s metric is what one core sustains.
func BenchmarkIngest(b *testing.B) {
	for _, enc := range []Encoding{Arrays, Maps} {
		for _, per := range []int{1, 8} {
			b.Run(fmt.Sprintf("enc=%d/blocks_per_event=%d", enc, per), func(b *testing.B) {
				payloads := ingestPayloads(enc, 64, 16, per)
				blocksPerPayload := 16 * per
				s := newSched(b, 1<<20)
				tr := NewTracker(schedTarget{s}, 16, 0)
				var d Decoder
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += blocksPerPayload {
					p := payloads[(i/blocksPerPayload)%len(payloads)]
					batch, err := d.Decode(p)
					if err != nil {
						b.Fatal(err)
					}
					tr.Apply("10.0.0.1:8000", 0, &batch)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events_per_s")
			})
		}
	}
}

// BenchmarkMemoryPerMillionBlocks reports the heap the exact view of one
// million blocks costs: the tracker's engine hash -> router key map and
// the scheduler's index.
func BenchmarkMemoryPerMillionBlocks(b *testing.B) {
	const n = 1 << 20
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := newSched(b, n)
		tr := NewTracker(schedTarget{s}, 16, 0)
		toks := make([]uint32, 16*64)
		for i := range toks {
			toks[i] = uint32(i)
		}
		hs := make([]uint64, 64)
		for i := 0; i < n; i += 64 {
			for j := range hs {
				hs[j] = uint64(i + j + 2)
			}
			toks[0] = uint32(i) // a new root each event: distinct keys
			batch := Batch{Events: []Event{{Kind: BlockStored, Hashes: hs, Tokens: toks, BlockSize: 16, Keyable: 64}}}
			tr.Apply("10.0.0.1:8000", 0, &batch)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := tr.Blocks("10.0.0.1:8000"); got != n {
			b.Fatalf("tracker holds %d blocks, want %d", got, n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "bytes/block")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20)*float64(1e6)/float64(n), "MiB/million_blocks")
		runtime.KeepAlive(s)
		runtime.KeepAlive(tr)
	}
}
