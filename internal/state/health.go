package state

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// health tracks whether Redis is reachable, from the results of every
// loop's operations, and logs once per outage and once per recovery. Safe
// for concurrent use.
type health struct {
	log *slog.Logger
	st  *counters

	mu        sync.Mutex
	up        bool
	okAt      time.Time // when the last success was recorded
	down      bool      // an outage is in progress (false before the first result)
	downSince time.Time
	outages   uint64
	epoch     uint64 // recoveries so far: readers rewind when it changes
	// denied and failing count the refusals (see refusal) and the
	// connection failures in a row of each operation; cause is the
	// operation whose failures started the current outage while others
	// succeeded, "" when nothing succeeded.
	denied, failing map[string]int
	cause           string
}

// deniedAfter is how many refusals in a row of one operation make an
// outage (a misconfigured or tampered Redis: a key of the wrong type, a
// user without the permissions, that will not fix itself), and how many
// connection failures in a row of one operation do while others succeed
// (a reply the guard refuses every time).
const deniedAfter = 3

// ok records that operation op succeeded. An outage started by refusals
// ends only when the operation refused succeeds.
func (h *health) ok(op string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.denied, op)
	delete(h.failing, op)
	h.okAt = time.Now()
	if h.down && h.cause != "" && h.cause != op {
		return
	}
	h.up = true
	if !h.down {
		return
	}
	h.log.Info("state: redis reachable again", "outage", time.Since(h.downSince).Round(time.Millisecond))
	h.down, h.cause = false, ""
	h.downSince = time.Time{}
	h.epoch++
}

// failed records that operation op, begun at began, failed with err.
// Errors Redis answered with (wrong type, no permission, ...) are counted
// and logged at Debug but say nothing about reachability. Any other error
// starts an outage, unless another operation succeeded after this one began
// (a dial that raced a restart says nothing about now); the next failure
// will tell.
func (h *health) failed(op string, began time.Time, err error) {
	if errors.Is(err, errPanic) { // counted and logged by safely
		return
	}
	h.st.errors.Add(1)
	if !unreachable(err) {
		if refusal(err) {
			h.refused(op, err)
			return
		}
		h.log.Debug("state: redis error", "op", op, "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing == nil {
		h.failing = make(map[string]int)
	}
	h.failing[op]++
	if h.down {
		return
	}
	if h.up && began.Before(h.okAt) {
		if h.failing[op] < deniedAfter {
			return
		}
		h.cause = op
	}
	h.up = false
	h.log.Warn("state: redis unreachable; routing on the local view until it returns", "op", op, "err", err)
	h.down = true
	h.downSince = time.Now()
	h.outages++
}

// refused records a refusal of op: after deniedAfter in a row, an outage.
func (h *health) refused(op string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.denied == nil {
		h.denied = make(map[string]int)
	}
	h.denied[op]++
	if h.denied[op] < deniedAfter || h.down {
		h.log.Debug("state: redis refused", "op", op, "err", err)
		return
	}
	h.up = false
	h.log.Warn("state: redis keeps refusing the pool's commands (wrong key type or permissions); routing on the local view until it accepts them", "op", op, "err", err)
	h.down, h.cause = true, op
	h.downSince = time.Now()
	h.outages++
}

// refusal reports whether err is Redis refusing the command for good: a key
// of the wrong type (WRONGTYPE) or missing permissions or credentials
// (NOPERM, NOAUTH, WRONGPASS).
func refusal(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"WRONGTYPE", "NOPERM", "NOAUTH", "WRONGPASS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// unreachable reports whether err is a connection failure rather than an
// answer from Redis.
func unreachable(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// LOADING, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN: the
		// server is there but cannot serve the pool now.
		msg := rerr.Error()
		for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

// currentEpoch returns the number of recoveries so far.
func (h *health) currentEpoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

func (h *health) fill(st *Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st.Up = h.up
	st.Outages = h.outages
	st.DownSince = h.downSince
}

// backoff is an exponential retry delay, 50ms doubling up to 1s. Not safe
// for concurrent use: each loop has its own.
type backoff struct{ next time.Duration }

const (
	backoffMin = 50 * time.Millisecond
	backoffMax = time.Second
)

// fail returns the delay before the next attempt.
func (b *backoff) fail() time.Duration {
	d := max(b.next, backoffMin)
	b.next = min(2*d, backoffMax)
	return d
}

func (b *backoff) reset() { b.next = 0 }

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
