package state

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// kvCount counts the block keys stored on it.
type kvCount struct{ n atomic.Int64 }

func (c *kvCount) Stored(_ string, keys []uint64) { c.n.Add(int64(len(keys))) }
func (c *kvCount) Removed(string, []uint64)       {}
func (c *kvCount) Cleared(string)                 {}
func (c *kvCount) SetExact(string, bool)          {}

// BenchmarkKVRelay: block events relayed from one replica to another
// through a real redis-server, in stores of 16 blocks (a 256-token prompt
// at 16 tokens a block): encode, XADD, XREAD, decode, apply. It reports
// blocks/s end to end and the stream bytes written per block.
func BenchmarkKVRelay(b *testing.B) {
	addr, _, _ := startRedis(b)
	inst := "10.0.0.7:8000"
	known := func(id string) bool { return id == inst }
	mk := func(name string, target KVTarget) *KVRelay {
		s, err := NewRedis(RedisOptions{Addrs: []string{addr}, Pool: "bench", Replica: name, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		r, err := NewKVRelay(s, target, KVRelayOptions{Known: known, SnapshotEvery: -1, Buffer: 1 << 24})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	var heard, got kvCount
	a, f := mk("a", &heard), mk("b", &got)
	stop := make(chan struct{})
	defer close(stop)
	for _, r := range []*KVRelay{a, f} {
		ctx, cancel := contextUntil(stop)
		b.Cleanup(cancel)
		go func() { _ = r.Run(ctx) }()
	}
	keys := make([]uint64, 16)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for j := range keys {
			keys[j] = uint64(i)<<8 | uint64(j)
		}
		a.Stored(inst, keys)
	}
	want := int64(16 * b.N)
	deadline := time.Now().Add(time.Minute)
	for got.n.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d blocks relayed within a minute", got.n.Load(), want)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
	el := time.Since(start)
	b.StopTimer()
	entry := encodeKV([]kvOp{{kind: kvStored, id: inst, keys: keys}}, DefaultKVMaxEntryBytes, time.Now())[0]
	b.ReportMetric(float64(want)/el.Seconds(), "blocks/s")
	b.ReportMetric(float64(len(entry)-kvHeader)/16, "B/block")
}

// contextUntil is a context that ends when stop is closed or cancel is
// called.
func contextUntil(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}
