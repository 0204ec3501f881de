package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestUnreachable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"wrapped io", fmt.Errorf("x: %w", net.ErrClosed), true},
		{"nil reply", redis.Nil, false},
		{"wrong type", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"loading", redisErr("LOADING Redis is loading the dataset in memory"), true},
		{"cluster down", redisErr("CLUSTERDOWN The cluster is down"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unreachable(tt.err); got != tt.want {
				t.Errorf("unreachable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// redisErr is an error answered by the server (it satisfies redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (e redisErr) RedisError()   {}

// TestHealthLogsOncePerOutage: one Warn per outage, one Info per recovery,
// however many operations fail or succeed.
func TestHealthLogsOncePerOutage(t *testing.T) {
	var buf bytes.Buffer
	var st counters
	h := health{log: slog.New(slog.NewTextHandler(&buf, nil)), st: &st}
	down := errors.New("connection refused")
	h.ok("read")
	for range 5 {
		h.failed("read", time.Now(), down)
	}
	began := time.Now()
	h.ok("read")
	h.failed("read", began, down) // begun before the recovery: no new outage
	h.ok("read")
	h.failed("read", time.Now(), redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"))
	for range 3 {
		h.failed("publish", time.Now(), down)
	}
	h.ok("read")
	log := buf.String()
	if w, i := strings.Count(log, "level=WARN"), strings.Count(log, "level=INFO"); w != 2 || i != 2 {
		t.Errorf("log has %d Warn and %d Info lines, want 2 and 2:\n%s", w, i, log)
	}
	var s Stats
	h.fill(&s)
	if !s.Up || s.Outages != 2 || !s.DownSince.IsZero() || h.currentEpoch() != 2 || st.errors.Load() != 10 {
		t.Errorf("after two outages: Up=%v Outages=%d DownSince=%v epoch=%d errors=%d; want true, 2, zero, 2, 10", s.Up, s.Outages, s.DownSince, h.currentEpoch(), st.errors.Load())
	}
}

func TestBackoff(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 7 {
		got = append(got, b.fail())
	}
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("fail() #%d = %v, want %v", i+1, got[i], want[i]*time.Millisecond)
		}
	}
	b.reset()
	if d := b.fail(); d != backoffMin {
		t.Errorf("fail() after reset() = %v, want %v", d, backoffMin)
	}
}

// TestHealthRefusals: Redis refusing one operation three times in a row
// (a key of the wrong type, missing permissions) is an outage, which only
// that operation's success ends; other answered errors are not.
func TestHealthRefusals(t *testing.T) {
	var st counters
	h := health{log: slog.New(slog.DiscardHandler), st: &st}
	up := func() bool {
		var s Stats
		h.fill(&s)
		return s.Up
	}
	h.ok("heartbeat")
	for range 5 {
		h.failed("heartbeat", time.Now(), redisErr("OOM command not allowed"))
	}
	h.failed("heartbeat", time.Now(), redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"))
	h.failed("heartbeat", time.Now(), redisErr("NOPERM this user has no permissions"))
	h.ok("read")
	if !up() {
		t.Fatalf("Up = false after 2 refusals, want true")
	}
	h.failed("heartbeat", time.Now(), redisErr("NOAUTH Authentication required."))
	if up() {
		t.Fatalf("Up = true after 3 refusals in a row, want false")
	}
	h.ok("read")
	if up() {
		t.Errorf("Up = true after another operation succeeded, want false until the heartbeat does")
	}
	h.ok("heartbeat")
	var s Stats
	h.fill(&s)
	if !s.Up || s.Outages != 1 {
		t.Errorf("after the heartbeat succeeded: Up=%v Outages=%d, want true, 1", s.Up, s.Outages)
	}
}

// TestHealthOneOperationFailing: connection failures of one operation
// while the others succeed (a reply refused every time) are an outage
// after three in a row, which only that operation's success ends.
func TestHealthOneOperationFailing(t *testing.T) {
	var st counters
	h := health{log: slog.New(slog.DiscardHandler), st: &st}
	refused := errors.New("state: redis reply refused")
	var s Stats
	for i := range 3 {
		began := time.Now()
		h.ok("read")
		h.fill(&s)
		if !s.Up {
			t.Fatalf("Up = false after %d heartbeat failures, want true below 3", i)
		}
		h.failed("heartbeat", began, refused)
	}
	h.ok("read")
	h.fill(&s)
	if s.Up || s.Outages != 1 {
		t.Fatalf("after 3 heartbeat failures: Up=%v Outages=%d, want false, 1", s.Up, s.Outages)
	}
	h.ok("heartbeat")
	h.fill(&s)
	if !s.Up {
		t.Errorf("Up = false after the heartbeat succeeded, want true")
	}
}
