package state

import "sync/atomic"

// counters are the cumulative Stats counters, updated by Dispatched and the
// Run loops without locks.
type counters struct {
	published, batches, coalesced, dropped atomic.Uint64
	errors                                 atomic.Uint64
	panics                                 atomic.Uint64
	// what was read from Redis and not used as it was
	malformed, oversized, clamped, ignored, badClock atomic.Uint64
	unsigned                                         atomic.Uint64
}

// fill copies the counters into st.
func (c *counters) fill(st *Stats) {
	st.Published = c.published.Load()
	st.Batches = c.batches.Load()
	st.Coalesced = c.coalesced.Load()
	st.Dropped = c.dropped.Load()
	st.Errors = c.errors.Load()
	st.Panics = c.panics.Load()
	st.Malformed = c.malformed.Load()
	st.Oversized = c.oversized.Load()
	st.Clamped = c.clamped.Load()
	st.Ignored = c.ignored.Load()
	st.BadClock = c.badClock.Load()
	st.Unsigned = c.unsigned.Load()
}
