package lock_test

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// tryAcquire is lock.New(coord, key) then TryAcquire(ctx, ttl): one
// acquisition, for tests that take each lock once.
func tryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.TryAcquire(ctx, ttl)
}

// acquire is lock.New(coord, key) then Acquire(ctx, ttl).
func acquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.Acquire(ctx, ttl)
}

// tryAcquireField is lock.NewFieldSet(coord, key) then TryAcquire(ctx,
// field, ttl).
func tryAcquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration) (*lock.FieldLease, error) {
	s, err := lock.NewFieldSet(coord, key)
	if err != nil {
		return nil, err
	}
	return s.TryAcquire(ctx, field, ttl)
}

// acquireField is lock.NewFieldSet(coord, key) then Acquire(ctx, field,
// ttl).
func acquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration) (*lock.FieldLease, error) {
	s, err := lock.NewFieldSet(coord, key)
	if err != nil {
		return nil, err
	}
	return s.Acquire(ctx, field, ttl)
}
