package state

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// panicky is a go-redis hook that panics on the first n commands and
// pipelines, like a bug triggered by a reply nothing anticipated.
type panicky struct{ left atomic.Int64 }

func (p *panicky) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *panicky) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.left.Add(-1) >= 0 {
			panic(fmt.Sprintf("injected panic in %s", cmd.Name()))
		}
		return next(ctx, cmd)
	}
}

func (p *panicky) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.left.Add(-1) >= 0 {
			panic("injected panic in a pipeline")
		}
		return next(ctx, cmds)
	}
}

// TestLoopsRecoverFromPanics makes the first Redis calls of every loop
// panic: the replica counts them, backs off, and then shares its state as
// usual.
func TestLoopsRecoverFromPanics(t *testing.T) {
	addr, _, _ := startRedis(t)
	p := &panicky{}
	p.left.Store(6)
	a := newReplica(t, addr, "a", nil, p)
	b := newReplica(t, addr, "b", nil)
	a.route(t, testPrompt(1, 8))
	eventually(t, 5*time.Second, func() string {
		st := a.store.Stats()
		switch {
		case st.Panics < 6:
			return fmt.Sprintf("Stats().Panics = %d, want 6", st.Panics)
		case !st.Up || st.Published == 0:
			return fmt.Sprintf("Stats() = %+v, want up and publishing after the panics", st)
		case b.coord.Stats().Applied == 0 || a.coord.Stats().Replicas != 1:
			return fmt.Sprintf("b applied %d of a's records, a sees %d replicas; want both > 0", b.coord.Stats().Applied, a.coord.Stats().Replicas)
		}
		return ""
	})
	if st := a.store.Stats(); st.Outages != 0 {
		t.Errorf("Stats().Outages = %d, want 0: a panic says nothing about Redis", st.Outages)
	}
}
