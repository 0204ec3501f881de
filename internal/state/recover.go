package state

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// errPanic marks a loop round that panicked (a bug, or a reply or value
// nothing anticipated). The loop logs it, counts it and retries with its
// usual backoff; it says nothing about whether Redis is reachable.
var errPanic = errors.New("state: recovered panic")

// safely runs one round of a background loop, turning a panic into an
// error wrapping errPanic.
func (s *RedisStore) safely(op string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.st.panics.Add(1)
			s.health.log.Error("state: recovered from a panic; retrying with backoff", "op", op, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w in %s: %v", errPanic, op, v)
		}
	}()
	return f()
}
