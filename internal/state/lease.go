package state

import (
	"context"
	"fmt"
	"time"
)

// TryLease implements coord.Transport with leaseScript on T:mig:<instance>:
// SET NX PX ttl, or PEXPIRE ttl when this replica already holds it. It
// waits at most LeaseTimeout (less if ctx ends sooner); on a Redis failure
// it returns false and an error wrapping ErrUnavailable.
func (s *RedisStore) TryLease(ctx context.Context, instance string, ttl time.Duration) (bool, error) {
	if err := checkLease(instance, ttl); err != nil {
		return false, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, LeaseTimeout)
	defer cancel()
	n, err := s.rdb.Eval(ctx, leaseScript, []string{s.keys.lease(instance)}, s.opt.Replica, ttl.Milliseconds()).Int()
	if err != nil {
		s.health.failed("lease", began, err)
		return false, fmt.Errorf("%w: lease on %q: %w", ErrUnavailable, instance, err)
	}
	return n == 1, nil
}

// checkLease validates TryLease's arguments.
func checkLease(instance string, ttl time.Duration) error {
	if instance == "" || ttl < time.Millisecond {
		return fmt.Errorf("%w: instance %q, ttl %v (want a non-empty instance and ttl >= 1ms)", ErrInvalidLease, instance, ttl)
	}
	return nil
}
