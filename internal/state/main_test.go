package state

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	redis.SetLogger(RedisLogger{Logger: quietLogger()}) // the tests kill Redis on purpose
	// zmq4's PUB writer goroutine can miss its socket's Close (see
	// internal/kvevents' TestMain): it belongs to the KV relay tests'
	// publisher, never to this package.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}
