package state

import (
	"context"
	"fmt"
	"time"
)

// memory is the Store of a single replica: there is no one to share with.
type memory struct{}

// NewMemory returns the Store of a single replica: Dispatched is a no-op,
// Run waits for ctx, TryLease always succeeds, and Stats reports Up with
// every counter at zero.
func NewMemory() Store { return memory{} }

func (memory) Dispatched(string, []uint64) {}

func (memory) Run(ctx context.Context, a Applier) error {
	if a == nil {
		return fmt.Errorf("state: memory store: %w", ErrNoApplier)
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
