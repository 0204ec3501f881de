package state

import (
	"context"
	"fmt"
	"time"

	"github.com/dualmap/dualmap/internal/coord"
)

// memory is the Store of a single replica: there is no one to share with.
type memory struct{}

// NewMemory returns the Store of a single replica. As a transport it is a
// pool of one: Beat sees only this replica, leading; Collect and Receive
// return nothing; TryLease always succeeds; Leave does nothing. Dispatched
// is a no-op, Run waits for ctx without running any round, and Stats
// reports Up with every counter at zero.
func NewMemory() Store { return memory{} }

// memoryReplica is the replica id of a memory store.
const memoryReplica = "local"

func (memory) Replica() string { return memoryReplica }

func (memory) Beat(context.Context, coord.Beat) (coord.Seen, error) {
	return coord.Seen{Members: []string{memoryReplica}, Leader: true}, nil
}

func (memory) Collect(context.Context, []string, *coord.Table) ([]coord.Peer, error) {
	return nil, nil
}

func (memory) Receive(context.Context) ([]coord.Batch, error) { return nil, nil }

func (memory) Leave(context.Context) error { return nil }

func (memory) Dispatched(string, []uint64) {}

func (memory) Run(ctx context.Context, c *coord.Coordinator) error {
	if c == nil {
		return fmt.Errorf("state: memory store: %w", ErrNoCoordinator)
	}
	<-ctx.Done()
	return nil
}

func (memory) Stats() Stats { return Stats{Up: true} }

func (memory) TryLease(_ context.Context, instance string, ttl time.Duration) (bool, error) {
	if err := checkLease(instance, ttl); err != nil {
		return false, err
	}
	return true, nil
}
