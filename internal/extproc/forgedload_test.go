package extproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
	"github.com/dualmap/dualmap/internal/coord/coordtest"
	"github.com/dualmap/dualmap/internal/state"
	"github.com/dualmap/dualmap/scheduler"
)

// A writer of the shared Redis that heartbeats as a replica, claiming a
// load of 5,000 per field on every instance (issue 24), through the real
// state store: the router's requests are still dispatched at once (they
// would otherwise wait max_queue_wait and get 429), and the cut is
// counted for that replica.
func TestForgedReplicaLoadCannotBlockRouting(t *testing.T) {
	addr := redisServer(t)
	ids := []string{healthyInstance(t), healthyInstance(t)}
	cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - instances: [{address: %q}, {address: %q}]
limits: {max_running: 4, max_queue_wait: 1s}
state:
  backend: redis
  redis: {addrs: [%q], heartbeat: 50ms}
`, ids[0], ids[1], addr))
	ts := start(t, cfg, true)

	fake := coordtest.NewScheduler(ids...)
	for _, id := range ids {
		fake.SetLocal(id, scheduler.Load{Queued: 5000, QueuedTokens: 5000, PendingTokens: 5000, Running: 5000})
	}
	st, err := state.NewRedis(state.RedisOptions{Addrs: []string{addr}, Prefix: "dualmap", Pool: "default", Replica: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	co, err := coord.New(st, fake, coord.Options{Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = st.Run(ctx, co) })
	defer func() { cancel(); wg.Wait() }()

	p := ts.srv.pools.Pools()[0]
	waitFor(t, "the router counts the attacker's load on every instance", func() bool {
		for _, in := range p.Instances() {
			if in.Remote.Running == 0 {
				return false
			}
		}
		return true
	})
	for _, in := range p.Instances() {
		if in.Remote.Running > 4 || in.Remote.Queued > 4 || in.Remote.PendingTokens > 1_200_000 {
			t.Errorf("instance %s remote load = %+v, want it cut to the running limit of 4 and the cache capacity", in.ID, in.Remote)
		}
	}
	for i := range 6 {
		c := ts.open(t)
		r := ts.post(t, c, "/v1/chat/completions", chat("m", fmt.Sprintf("question %d", i), false))
		dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint")
		if dest == "" {
			t.Fatalf("request %d got no destination with a forged load in Redis: %v", i, r)
		}
		if !strings.Contains(strings.Join(ids, ","), strings.Split(dest, ",")[0]) {
			t.Errorf("request %d routed to %q, want one of %v", i, dest, ids)
		}
		c.responseHeaders(t, "200")
		c.close()
	}
	if s := p.Scheduler().Stats(); s.Expired != 0 || s.Routed != 6 {
		t.Errorf("scheduler stats = %+v, want 6 routed and none expired", s)
	}
	if got := p.Coordinator().Stats().ClampedBy["attacker"]; got == 0 {
		t.Errorf("ClampedBy[attacker] = 0, want the attacker's records counted as clamped")
	}
	ts.srv.pools.UpdateGauges()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		if mf.GetName() == "dualmap_remote_load_clamped" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "replica" && m.GetGauge().GetValue() > 0 {
						series = append(series, l.GetValue())
					}
				}
			}
		}
	}
	if !slices.Contains(series, "attacker") {
		t.Errorf("dualmap_remote_load_clamped replicas with clamps = %v, want attacker among them", series)
	}
}

// With state.redis.record_key_file, the same forged heartbeat, written
// without the key, does not count at all: the router's remote load stays
// zero and the refused records are counted as unsigned.
func TestForgedReplicaLoadRefusedWithRecordKeys(t *testing.T) {
	addr := redisServer(t)
	keyFile := filepath.Join(t.TempDir(), "record-keys")
	if err := os.WriteFile(keyFile, []byte("a-record-key-of-32-bytes-or-so..\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ids := []string{healthyInstance(t), healthyInstance(t)}
	cfg := parseConfig(t, fmt.Sprintf(`
pools:
  - instances: [{address: %q}, {address: %q}]
limits: {max_running: 4, max_queue_wait: 1s}
state:
  backend: redis
  redis: {addrs: [%q], heartbeat: 50ms, record_key_file: %q}
`, ids[0], ids[1], addr, keyFile))
	ts := start(t, cfg, true)
	fake := coordtest.NewScheduler(ids...)
	for _, id := range ids {
		fake.SetLocal(id, scheduler.Load{Queued: 5000, QueuedTokens: 5000, PendingTokens: 5000, Running: 5000})
	}
	st, err := state.NewRedis(state.RedisOptions{Addrs: []string{addr}, Prefix: "dualmap", Pool: "default", Replica: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	co, err := coord.New(st, fake, coord.Options{Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = st.Run(ctx, co) })
	defer func() { cancel(); wg.Wait() }()

	p := ts.srv.pools.Pools()[0]
	waitFor(t, "the router refuses the attacker's unsigned records twice", func() bool { return p.Store().Stats().Unsigned >= 2 })
	for _, in := range p.Instances() {
		if in.Remote != (scheduler.Load{}) {
			t.Errorf("instance %s remote load = %+v, want none (the only other replica's records are unsigned)", in.ID, in.Remote)
		}
	}
	c := ts.open(t)
	r := ts.post(t, c, "/v1/chat/completions", chat("m", "question", false))
	if dest := setHeader(r.GetRequestBody().GetResponse().GetHeaderMutation(), "x-gateway-destination-endpoint"); dest == "" {
		t.Fatalf("request got no destination: %v", r)
	}
	c.responseHeaders(t, "200")
	c.close()
}
