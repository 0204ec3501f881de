package pool

import (
	"context"
	"testing"

	"github.com/dualmap/dualmap/scheduler"
)

// fakeSource feeds what it is given once, then waits for its context.
type fakeSource struct {
	load    scheduler.EngineLoad
	blocks  []uint64
	healthy map[string]bool
	fed     chan struct{}
}

func (*fakeSource) Name() string { return "fake" }

func (s *fakeSource) Run(ctx context.Context, sink Sink) {
	for _, id := range sink.Addresses() {
		sink.Load(id, s.load)
		sink.Stored(id, s.blocks)
		sink.Health(id, s.healthy[id])
	}
	sink.Load("6.6.6.6:80", s.load) // no instance: ignored
	close(s.fed)
	<-ctx.Done()
}

// A Source's signals land where their owner keeps them: engine load in the
// scheduler's ledger, stored blocks in its cache index, health in the
// pool's health records (and from there in the scheduler's ready flags).
func TestSourceFeedsThePool(t *testing.T) {
	m := startManager(t, parseConfig(t, fourInstances), false, Options{})
	p := m.Pools()[0]
	r, err := p.Tokenize(chat(t, "a prompt long enough to fill a block or two of tokens for the prefix index; "+
		"a prompt long enough to fill a block or two of tokens for the prefix index"), Controls{})
	if err != nil || len(r.Blocks) == 0 {
		t.Fatalf("Tokenize() = %v blocks, %v", r, err)
	}
	src := &fakeSource{load: scheduler.EngineLoad{Waiting: 5, Running: 2}, blocks: r.Blocks,
		healthy: map[string]bool{"10.0.0.1:8000": true, "10.0.0.2:8000": true, "10.0.0.3:8000": true}, fed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.supervise(ctx, src.Name(), func(ctx context.Context) { src.Run(ctx, p) }); close(done) }()
	<-src.fed
	for _, st := range p.Instances() {
		if st.Engine.Waiting != 5 || st.Engine.Running != 2 {
			t.Errorf("%s engine load = %+v, want the source's", st.ID, st.Engine)
		}
		if want := st.ID != "10.0.0.4:8000"; st.Healthy != want {
			t.Errorf("%s healthy = %v, want %v", st.ID, st.Healthy, want)
		}
	}
	if !p.HealthOf("10.0.0.4:8000").Down {
		t.Errorf("10.0.0.4:8000 reported unhealthy, but its health record is not down")
	}
	d, err := p.Scheduler().(*scheduler.Scheduler).Pick(r)
	if err != nil {
		t.Fatal(err)
	}
	if d.CachedTokens == 0 {
		t.Errorf("Pick() after Stored = %d cached tokens on %s, want the stored prompt", d.CachedTokens, d.Instance)
	}
	cancel()
	<-done
}
