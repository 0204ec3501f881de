package pool

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/kvevents"
	"github.com/dualmap/dualmap/internal/tokenize"
	"github.com/dualmap/dualmap/scheduler"
)

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// redisForPool runs a throwaway redis-server (no persistence) until the
// test ends; without one the test is skipped (fails under
// DUALMAP_REQUIRE_REDIS=1).
func redisForPool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("DUALMAP_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not found and DUALMAP_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server not found")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "redis-server answering", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// stoppable starts a running manager and returns it with a stop that
// waits for Run to end and closes it (idempotent; also at the test's end).
func stoppable(t *testing.T, cfg config.Config, replica string) (*testManager, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(cfg, Options{Registry: reg, TickInterval: 10 * time.Millisecond, Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		m.Close()
	}
	t.Cleanup(stop)
	return &testManager{Manager: m, reg: reg}, stop
}

// TestKVRelayReplicasAgree: the engine dials one replica's bind address,
// as llm-d's simulator does; the other two hear it through Redis and agree
// with it block for block (the real schedulers' exact indexes, probed
// with Pick) after a burst, and a replica restarted cold rebuilds from the
// relay's stream.
func TestKVRelayReplicasAgree(t *testing.T) {
	raddr := redisForPool(t)
	id := healthyInstance(t)
	cfgOf := func(bind string) config.Config {
		return parseConfig(t, fmt.Sprintf(`
pools:
  - block_size: 4
    policy: {name: cache-affinity}
    instances: [{address: %s}]
    kv_events: {enabled: true, mode: bind, bind: 'tcp://%s'}
state:
  backend: redis
  redis: {addrs: [%q], heartbeat: 50ms}
`, id, bind, raddr))
	}
	heard := freeAddr(t)
	a, _ := stoppable(t, cfgOf(heard), "a")
	b, _ := stoppable(t, cfgOf(freeAddr(t)), "b")
	cBind := freeAddr(t)
	c, stopC := stoppable(t, cfgOf(cBind), "c")
	pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: "tcp://" + heard, Mode: kvevents.Connect, Topic: "kv@" + id + "@m", Encoding: kvevents.Maps})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	replicas := []*testManager{a, b, c}
	exactAll := func() bool {
		for _, m := range replicas {
			if st := m.Pools()[0].Instances()[0]; !st.ExactCache {
				return false
			}
		}
		return true
	}
	waitFor(t, "every replica's exact view", func() bool {
		_ = pub.Publish(1, []kvevents.Event{{Kind: kvevents.AllBlocksCleared}}, -1) // until the subscriber has joined
		return exactAll()
	})
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
	const want = 200*4 - 67*3
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
	if first := probe(a); first[0] != 4 || first[1] != 16 {
		t.Fatalf("cached tokens %v..., want 4 (evicted down to one block) then 16", first[:2])
	}
	stopC()
	c2, _ := stoppable(t, cfgOf(cBind), "c")
	replicas[2] = c2
	waitFor(t, "the restarted replica rebuilt from the stream and in agreement", agree)

	// The relays' series: the replica hearing the engine wrote, the others
	// applied.
	if v := a.metricValues(t)["dualmap_kv_relay_operations{pool=default,what=published}"]; v == 0 {
		t.Errorf("the hearing replica's published operations = %v, want > 0 (%v)", v, a.metricValues(t))
	}
	if v := b.metricValues(t)["dualmap_kv_relay_operations{pool=default,what=applied}"]; v == 0 {
		t.Errorf("a follower's applied operations = %v, want > 0", v)
	}
}
