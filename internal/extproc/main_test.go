package extproc

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dualmap/dualmap/internal/state"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial during the Redis outage tests.
	redis.SetLogger(state.RedisLogger{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	os.Exit(m.Run())
}
