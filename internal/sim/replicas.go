package sim

import (
	"context"
	"fmt"

	"github.com/dualmap/dualmap/internal/coord"
)

// Several router replicas share state the way serve's replicas do: through
// one coord.Coordinator each, over an in-process coord.Hub on the simulated
// clock instead of Redis. Every SyncInterval each replica runs its
// coordination round (publishes the dispatch records it buffered since its
// last round, then Sync and Receive); every Tick it rebalances through
// leases on the source instances, as serve does with Rebalance.External.

// coordinated reports whether the replicas share state (independent
// replicas, SyncInterval 0, share nothing, leases included).
func (c *cluster) coordinated() bool { return c.opt.Replicas > 1 && c.opt.SyncInterval > 0 }

// connect joins every replica to one hub. What a replica publishes at its
// round becomes visible to the others from half an interval later: at
// their next round, not at this one, whatever order the replicas run in
// (any delay under the interval does that; half leaves room for the
// rounding of the floating-point simulated clock).
func (c *cluster) connect() error {
	if !c.coordinated() {
		return nil
	}
	c.hub = coord.NewHub(coord.HubOptions{Now: c.clock, Delay: c.opt.SyncInterval / 2})
	for i, s := range c.reps {
		l := c.hub.Join(fmt.Sprintf("replica-%d", i))
		co, err := coord.New(l, s, coord.Options{
			Heartbeat:    c.opt.SyncInterval,
			LeaseTTL:     2 * c.opt.Tick,
			LeaseTimeout: -1, // the hub answers at once
			Now:          c.clock,
		})
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		c.links = append(c.links, l)
		c.coords = append(c.coords, co)
	}
	return nil
}

// exchange runs every replica's coordination round, in replica order.
func (c *cluster) exchange() {
	ctx := context.Background()
	for i, co := range c.coords {
		c.links[i].Flush()
		if err := co.Sync(ctx); err != nil {
			panic(err) // the hub does not fail
		}
		if err := co.Receive(ctx); err != nil {
			panic(err)
		}
	}
}

// rebalance runs replica i's leased rebalancing round, when it has one.
func (c *cluster) rebalance(i int) {
	if c.coords != nil && c.reps[i].Rebalances() {
		c.coords[i].Rebalance(context.Background())
		c.handle()
	}
}
