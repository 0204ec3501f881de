package extproc

import (
	"io"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dualmap/dualmap/internal/state"
)

// TestMain fails the package when a goroutine outlives its tests: the
// streams, the background loops (health, DNS, engine metrics, state), the
// gRPC and admin servers and the Redis clients they start must all end
// with their context or their Close.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial during the Redis outage tests.
	redis.SetLogger(state.RedisLogger{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	goleak.VerifyTestMain(m)
}
