package pool

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/scheduler"
)

// A pool with kv_events subscribes to its instances' publishers: what an
// engine stores (its own hashes, the token ids) lands in the scheduler's
// index under the router's keys, the instance's view turns exact, an
// eviction leaves the index, and the prediction no longer adds to it.
func TestKVEventsFeedTheScheduler(t *testing.T) {
	pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://127.0.0.1:0", Mode: kvevents.Bind, Encoding: kvevents.Maps})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	port := pub.Addr().(*net.TCPAddr).Port
	id := healthyInstance(t) // on the publisher's host
	cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - block_size: 4
    policy: {name: cache-affinity}
    instances: [{address: %s}]
    kv_events: {enabled: true, port: %d}
`, id, port))
	m := startManager(t, cfg, true, Options{})
	p := m.Pools()[0]
	state := func() scheduler.InstanceState {
		for _, st := range p.Instances() {
			if st.ID == id {
				return st
			}
		}
		t.Fatalf("no instance %s", id)
		return scheduler.InstanceState{}
	}
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(1000 + i)
	}
	hashes := []uint64{1<<63 + 1, 1<<63 + 2, 1<<63 + 3, 1<<63 + 4} // the engine's own, unrelated to the router's
	waitFor(t, "the exact view after AllBlocksCleared", func() bool {
		_ = pub.Publish(1, []kvevents.Event{{Kind: kvevents.AllBlocksCleared}}, -1)
		return state().ExactCache
	})
	if err := pub.Publish(2, []kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hashes, Tokens: toks, BlockSize: 4}}, -1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "4 stored blocks and a healthy instance", func() bool { st := state(); return st.CachedBlocks == 4 && st.Healthy })

	// The router's request with these tokens finds them all on id.
	r := &scheduler.Request{Blocks: tokenize.Blocks(toks, 4, nil), Tokens: 16}
	s := p.Scheduler().(*scheduler.Scheduler)
	if d, err := s.Pick(r); err != nil || d.Instance != id || d.CachedTokens != 16 {
		t.Fatalf("Pick() = %+v, %v, want %s with 16 cached", d, err, id)
	}
	if err := pub.Publish(3, []kvevents.Event{{Kind: kvevents.BlockRemoved, Hashes: hashes[2:]}}, -1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 blocks left after the eviction", func() bool { return state().CachedBlocks == 2 })
	if d, err := s.Pick(r); err != nil || d.CachedTokens != 8 {
		t.Fatalf("Pick() after eviction = %+v, %v, want 8 cached", d, err)
	}
	vals := m.metricValues(t)
	if vals["dualmap_kv_event_blocks_total{outcome=stored,pool=default}"] != 4 || vals["dualmap_kv_event_blocks_total{outcome=removed,pool=default}"] != 2 {
		t.Errorf("block counters = %v", vals)
	}
}

// Three router replicas in connect mode each subscribe to the engine
// (PUB/SUB fans out): after a burst of stores and evictions they agree
// block for block without exchanging anything, and a replica that starts
// late (as a restarted one does) rebuilds the same view from replay.
func TestKVEventsReplicasAgree(t *testing.T) {
	pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://127.0.0.1:0", Mode: kvevents.Bind, Replay: "tcp://127.0.0.1:0", Encoding: kvevents.Arrays})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	id := healthyInstance(t)
	cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - block_size: 4
    policy: {name: cache-affinity}
    instances: [{address: %s}]
    kv_events: {enabled: true, port: %d, replay_port: %d}
`, id, pub.Addr().(*net.TCPAddr).Port, pub.ReplayAddr().(*net.TCPAddr).Port))
	replicas := []*testManager{startManager(t, cfg, true, Options{}), startManager(t, cfg, true, Options{}), startManager(t, cfg, true, Options{})}
	exactAll := func() bool {
		for _, m := range replicas {
			if st := m.Pools()[0].Instances()[0]; !st.ExactCache {
				return false
			}
		}
		return true
	}
	waitFor(t, "every replica's exact view", func() bool {
		_ = pub.Publish(1, nil, -1) // until all have joined (replay brings them seq 0)
		return exactAll()
	})
	// A burst: 200 prompts of 4 blocks, every third one evicted again.
	var prompts [][]uint32
	for p := range 200 {
		toks := make([]uint32, 16)
		for i := range toks {
			toks[i] = uint32(p*1000 + i)
		}
		prompts = append(prompts, toks)
		hs := []uint64{uint64(p)<<8 | 1, uint64(p)<<8 | 2, uint64(p)<<8 | 3, uint64(p)<<8 | 4}
		evs := []kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hs, Tokens: toks, BlockSize: 4}}
		if p%3 == 0 {
			evs = append(evs, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: hs[1:]})
		}
		if err := pub.Publish(2, evs, -1); err != nil {
			t.Fatal(err)
		}
	}
	const want = 200*4 - 67*3 // 67 of the 200 lost 3 blocks each
	probe := func(m *testManager) []int {
		s := m.Pools()[0].Scheduler().(*scheduler.Scheduler)
		var out []int
		for _, toks := range prompts {
			d, err := s.Pick(&scheduler.Request{Blocks: tokenize.Blocks(toks, 4, nil), Tokens: 16})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d.CachedTokens)
		}
		return out
	}
	agree := func() bool {
		first := probe(replicas[0])
		for _, m := range replicas {
			st := m.Pools()[0].Instances()[0]
			if !st.ExactCache || st.CachedBlocks != want || !slices.Equal(probe(m), first) {
				return false
			}
		}
		return true
	}
	waitFor(t, "the three replicas in agreement after the burst", agree)
	// A fourth replica starts now (as a restarted one would): its view comes
	// back from replay.
	replicas = append(replicas, startManager(t, cfg, true, Options{}))
	waitFor(t, "the restarted replica rebuilt and in agreement", func() bool {
		_ = pub.Publish(3, nil, -1) // its first live message asks for the replay
		return agree()
	})
}
