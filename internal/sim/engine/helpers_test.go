package engine

import (
	"math"
	"testing"

	"github.com/dualmap/dualmap/internal/hashing"
)

// testProfile has dyadic times so that step sums are exact in float64:
// 1/1024 s per prefill token, steps of 1024 tokens, blocks of 512 tokens.
func testProfile() Profile {
	return Profile{
		Name:             "test",
		EngineModel:      ModelLegacy,
		PrefillPerToken:  1.0 / 1024,
		DecodeStepBase:   1.0 / 64,
		DecodePerSeq:     1.0 / 256,
		KVBytesPerToken:  1,
		HBMCacheBytes:    64 * 512,
		MaxBatchedTokens: 1024,
		MaxNumSeqs:       8,
		MaxModelLen:      8192,
		BlockSize:        512,
	}
}

func newEngine(t testing.TB, p Profile) *Engine {
	t.Helper()
	e, err := New(p)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return e
}

// chain returns n chained block hashes: the first shared come from the
// common root 0 (equal across calls), the rest from root.
func chain(root uint64, shared, n int) []uint64 {
	out := make([]uint64, n)
	var h uint64
	for i := range n {
		salt := uint64(0)
		if i >= shared {
			salt = root
		}
		h = hashing.Mix64(h ^ hashing.Mix64(salt+uint64(i)+1))
		out[i] = h
	}
	return out
}

// arrival is a request to submit at a time.
type arrival struct {
	at float64
	r  *Request
}

// drive submits the arrivals (sorted by time) and runs the engine until idle,
// checking that events are in time order and never later than the now of
// the Advance that emitted them. It also advances to a point halfway to the
// next step end now and then, to exercise partial Advances.
func drive(t *testing.T, e *Engine, arrivals []arrival) []Event {
	t.Helper()
	var events []Event
	last := math.Inf(-1)
	advance := func(now float64) {
		n := len(events)
		events = e.Advance(now, events)
		for _, ev := range events[n:] {
			if ev.Time > now {
				t.Fatalf("Advance(%v) emitted an event at %v", now, ev.Time)
			}
			if ev.Time < last {
				t.Fatalf("event at %v after one at %v: not in time order", ev.Time, last)
			}
			last = ev.Time
		}
	}
	steps := 0
	runTo := func(until float64) {
		for next := e.NextTime(); next <= until && !math.IsInf(next, 1); next = e.NextTime() {
			if steps++; steps%3 == 0 && !math.IsInf(last, -1) && next > last {
				advance((last + next) / 2)
			}
			advance(next)
		}
		advance(until)
	}
	for _, a := range arrivals {
		runTo(a.at)
		e.Submit(a.at, a.r)
	}
	runTo(math.Inf(1))
	if e.Running() != 0 || e.Waiting() != 0 {
		t.Fatalf("after draining Running() = %d, Waiting() = %d, want 0, 0", e.Running(), e.Waiting())
	}
	return events
}
