package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A field held by another owner without a TTL (HPERSISTed, or written by
// someone else) would never be left: FieldSet.TryAcquire and Acquire
// return a terminal ErrBadState naming the operation, key and field, at
// once, and write nothing (before, TryAcquire answered ErrNotAcquired and
// Acquire waited until ctx ended), as the key lock does for a key without
// a TTL.
func TestFieldWithoutTTLIsBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("pf")
		held := must(tryAcquireField(ctx, b.Coordinator(t), "pf", "f1", time.Minute))(t)
		if err := raw.HPersist(ctx, key, "f1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := raw.HSet(ctx, key, "f2", "someone-else").Err(); err != nil {
			t.Fatal(err)
		}
		for field, value := range map[string]string{"f1": held.Token(), "f2": "someone-else"} {
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, coordination.ErrBadState) || errors.Is(err, coordination.ErrNotAcquired) ||
					engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), `"pf" field "`+field+`"`) {
					t.Errorf("%s %s: %v, want a terminal ErrBadState naming the key and field", what, field, err)
				}
				if v, ms := fieldState(t, raw, key, field); v != value || ms != -1 {
					t.Errorf("after %s %s holds %q (HPTTL %d), want %q unchanged without a TTL", what, field, v, ms, value)
				}
			}
			_, err := tryAcquireField(ctx, b.Coordinator(t), "pf", field, time.Minute)
			check("TryAcquire", err)
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err = acquireField(actx, b.Coordinator(t), "pf", field, time.Minute)
			if actx.Err() != nil {
				t.Errorf("Acquire %s waited until its context ended", field)
			}
			cancel()
			check("Acquire", err)
		}
	}, testharness.HashFieldTTLOnly())
}
