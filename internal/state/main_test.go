package state

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	redis.SetLogger(RedisLogger{Logger: quietLogger()}) // the tests kill Redis on purpose
	goleak.VerifyTestMain(m)
}
