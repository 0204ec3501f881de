package kvevents

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind. zmq4's PUB
// writer goroutine can miss its socket's Close (a lost condition-variable
// signal in zmq4): that one belongs to the test publishers, never to the
// subscriber, and is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}
