package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTryLease(t *testing.T) {
	addr, _, _ := startRedis(t)
	rs := startReplicas(t, addr, 2)
	a, b := rs[0], rs[1]
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	const inst = "10.0.0.1:8000"

	try := func(r *replica, want bool) {
		t.Helper()
		got, err := r.store.TryLease(ctx, inst, ttl)
		if err != nil || got != want {
			t.Fatalf("%s: TryLease() = %v, %v; want %v, nil", r.name, got, err, want)
		}
	}
	t.Run("one wins", func(t *testing.T) {
		wins := make(chan bool, 2)
		for _, r := range rs {
			go func() {
				ok, err := r.store.TryLease(ctx, inst, ttl)
				if err != nil {
					t.Errorf("%s: TryLease() error = %v", r.name, err)
				}
				wins <- ok
			}()
		}
		if n := btoi(<-wins) + btoi(<-wins); n != 1 {
			t.Fatalf("TryLease() from both replicas: %d won, want exactly 1", n)
		}
	})
	t.Run("after ttl the other can", func(t *testing.T) {
		time.Sleep(ttl + 50*time.Millisecond)
		try(a, true)
		try(b, false)
		try(a, true) // the holder renews
		time.Sleep(ttl + 50*time.Millisecond)
		try(b, true)
		try(a, false)
	})
	t.Run("other instances are independent", func(t *testing.T) {
		got, err := a.store.TryLease(ctx, "10.0.0.2:8000", ttl)
		if err != nil || !got {
			t.Fatalf("a: TryLease(other instance) = %v, %v; want true, nil", got, err)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestTryLeaseInvalid(t *testing.T) {
	stores := map[string]Store{"memory": NewMemory()}
	rs, err := NewRedis(RedisOptions{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatalf("NewRedis() error = %v", err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	stores["redis"] = rs
	tests := []struct {
		name     string
		instance string
		ttl      time.Duration
	}{
		{"empty instance", "", time.Second},
		{"zero ttl", "a", 0},
		{"sub-millisecond ttl", "a", time.Microsecond},
		{"negative ttl", "a", -time.Second},
	}
	for name, s := range stores {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				got, err := s.TryLease(context.Background(), tt.instance, tt.ttl)
				if got || !errors.Is(err, ErrInvalidLease) {
					t.Errorf("TryLease(%q, %v) = %v, %v; want false, ErrInvalidLease", tt.instance, tt.ttl, got, err)
				}
			})
		}
	}
}

// TestTryLeaseUnavailable: with Redis gone TryLease fails fast.
func TestTryLeaseUnavailable(t *testing.T) {
	addr, stop, _ := startRedis(t)
	s, err := NewRedis(RedisOptions{Addrs: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("NewRedis() error = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if ok, err := s.TryLease(context.Background(), "x", time.Second); !ok || err != nil {
		t.Fatalf("TryLease() = %v, %v; want true, nil", ok, err)
	}
	stop()
	start := time.Now()
	ok, err := s.TryLease(context.Background(), "x", time.Second)
	if el := time.Since(start); el > LeaseTimeout+100*time.Millisecond {
		t.Errorf("TryLease() with Redis down took %v, want <= %v", el, LeaseTimeout)
	}
	if ok || !errors.Is(err, ErrUnavailable) {
		t.Errorf("TryLease() with Redis down = %v, %v; want false, ErrUnavailable", ok, err)
	}
}
