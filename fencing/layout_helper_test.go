package fencing_test

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// sharedOf returns the full name of the shared counter hash that holds the
// counter of fenceKey (given without the prefix), and its field there.
func sharedOf(b *testharness.Backend, fenceKey string) (hash, field string) {
	field = b.Key(fenceKey)
	return fencingcore.SharedKeyOf(b.Prefix(), field), field
}

// counterOf reads fenceKey's counter: its field in the shared counter hash
// of its Cluster slot (the layout since issue 24; before, a string at
// fenceKey).
func counterOf(ctx context.Context, c redis.UniversalClient, b *testharness.Backend, fenceKey string) *redis.StringCmd {
	h, f := sharedOf(b, fenceKey)
	return c.HGet(ctx, h, f)
}
