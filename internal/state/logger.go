package state

import (
	"context"
	"fmt"
	"log/slog"
)

// RedisLogger adapts a slog.Logger to go-redis's process-wide logger. The
// client library logs every failed dial on its own (several lines a second
// while Redis is down), which duplicates the store's one Warn per outage.
// A program that wants only the latter calls, once in main:
//
//	redis.SetLogger(state.RedisLogger{Logger: logger})
//
// which sends those messages to logger at Debug level. This package never
// calls redis.SetLogger itself: it is global to the process.
type RedisLogger struct{ Logger *slog.Logger }

// Printf implements go-redis's logging interface.
func (l RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.Logger.DebugContext(ctx, fmt.Sprintf(format, v...), "source", "go-redis")
}
