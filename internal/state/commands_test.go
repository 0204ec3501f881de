package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCommandsPerDispatch measures the Redis commands two replicas send
// while one of them shares 10,000 dispatches over one second across the 8
// instances, until the other has applied them all; and the propagation
// delay seen by the reader.
func TestCommandsPerDispatch(t *testing.T) {
	const total = 10_000
	addr, _, _ := startRedis(t)
	var ca, cb commandCounter
	a := newReplica(t, addr, "a", nil, &ca)
	b := newReplica(t, addr, "b", nil, &cb)
	ids := testPool(8)
	rng := rand.New(rand.NewPCG(1, 2))
	prompts := make([][]uint64, total)
	for i := range prompts {
		prompts[i] = testPrompt(uint64(i+1), 8+rng.IntN(25))
	}
	// The bounds of the two waits are for a loaded machine: on a quiet
	// one both take a few heartbeats (100 ms).
	eventually(t, 10*time.Second, func() string { // both heartbeating
		if a.coord.Stats().Replicas != 1 || b.coord.Stats().Replicas != 1 {
			return "replicas do not see each other yet"
		}
		return ""
	})
	ca.n.Store(0)
	cb.n.Store(0)

	start := time.Now()
	for i, p := range prompts {
		if i%10 == 0 { // 10 per millisecond
			time.Sleep(time.Until(start.Add(time.Duration(i/10) * time.Millisecond)))
		}
		a.store.Dispatched(ids[i%len(ids)].ID, p)
	}
	sent := time.Since(start)
	eventually(t, time.Minute, func() string { // about 1 s quiet; 20 s seen under -race on a loaded machine
		if st := b.coord.Stats(); st.Applied != total {
			return fmt.Sprintf("b: coord Stats().Applied = %d, want %d", st.Applied, total)
		}
		// The publisher counts a batch once Redis has acknowledged it,
		// which the reader can see before the count moves.
		if st := a.store.Stats(); st.Published+st.Dropped != total {
			return fmt.Sprintf("a: Stats() Published=%d Dropped=%d, want %d in all", st.Published, st.Dropped, total)
		}
		return ""
	})
	elapsed := time.Since(start)
	na, nb := ca.n.Load(), cb.n.Load()
	perDispatch := float64(na+nb) / total
	sa, sb := a.store.Stats(), b.store.Stats()
	t.Logf("%d dispatches in %v, all applied after %v: %d commands from the publisher, %d from the reader: %.4f commands per dispatch (%.4f publisher only); %d stream entries",
		total, sent.Round(time.Millisecond), elapsed.Round(time.Millisecond), na, nb, perDispatch, float64(na)/total, sa.Batches)
	t.Logf("propagation delay (oldest record of a batch to applied), last %d batches: p50 %v, p99 %v",
		min(int(sa.Batches), PropagationWindow), sb.PropagationP50.Round(10*time.Microsecond), sb.PropagationP99.Round(10*time.Microsecond))
	if perDispatch > 1 {
		t.Errorf("commands per dispatch = %.3f, want <= 1", perDispatch)
	}
	if sa.Published != total || sa.Dropped != 0 {
		t.Errorf("a: Stats() Published=%d Dropped=%d, want %d and 0", sa.Published, sa.Dropped, total)
	}
}

// BenchmarkDispatched is the hot-path cost of sharing one dispatch
// (16 blocks), with Run publishing concurrently.
func BenchmarkDispatched(b *testing.B) {
	addr, _, _ := startRedis(b)
	var c commandCounter
	r := newReplica(b, addr, "bench", nil, &c)
	p := testPrompt(1, 16)
	ids := testPool(8)
	c.n.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p := append([]uint64(nil), p...)
			p[15] = uint64(i) // distinct, so nothing coalesces
			r.store.Dispatched(ids[i%len(ids)].ID, p)
			i++
		}
	})
	b.StopTimer()
	time.Sleep(50 * time.Millisecond) // let the last flush go out
	b.ReportMetric(float64(c.n.Load())/float64(b.N), "cmds/dispatch")
}
