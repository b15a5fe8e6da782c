package ratelimit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Wait(ctx, 0) asks for nothing and grants at once, as x/time/rate's
// WaitN(ctx, 0) does: an allowed Decision with Available -1, a nil error,
// nothing sent to Redis, admitted once (RATE LIMIT ACQUIRE, Succeeded),
// even when every permit is taken; a context that has ended gets its
// error. Allow(ctx, 0) stays a probe. (Wait(ctx, 0) probed and, with no
// permit free, waited for one it would not take or failed with a
// *WaitError.)
func TestWaitZeroPermitsGrantsAtOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rec := &testharness.HookRecorder{}
		c := b.Coordinator(t, coordination.WithHooks(rec))
		counter := testharness.CountCommands(c.Client())
		for _, k := range every {
			if k == kConc { // ConcurrencyLimiter.Acquire refuses 0 permits
				continue
			}
			l := build(t, c, k, "zero:"+string(k), 2, time.Hour)
			if !acquire(t, l, 2).Acquired() {
				t.Fatalf("%s: the first 2 permits were refused", k)
			}
			if d, err := l.Limiter.Allow(ctx, 0); err != nil || d.Allowed() {
				t.Fatalf("%s: Allow(0) on an exhausted limiter = %+v, %v; want a refused probe", k, d, err)
			}
			counter.Reset()
			before := len(rec.Ops())
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			d, err := l.Limiter.Wait(wctx, 0)
			ended := wctx.Err()
			cancel()
			if err != nil || !d.Allowed() || d.Denied() || d.Available() != -1 || ended != nil {
				t.Fatalf("%s: Wait(0) = %+v, %v (context ended: %v); want an allowed Decision at once, Available -1", k, d, err, ended)
			}
			if r, ok := d.RetryAfter(); ok {
				t.Fatalf("%s: Wait(0) granted with RetryAfter %v", k, r)
			}
			if n := counter.Count(); n != 0 {
				t.Fatalf("%s: Wait(0) sent %d commands %v; want none", k, n, counter.Names())
			}
			if ops, want := rec.Ops()[before:], []string{"rate_limit:RATE LIMIT ACQUIRE:succeeded"}; !slices.Equal(ops, want) {
				t.Fatalf("%s: Wait(0) admitted as %v; want %v", k, ops, want)
			}
			cctx, ccancel := context.WithCancel(ctx)
			ccancel()
			if d, err := l.Limiter.Wait(cctx, 0); !errors.Is(err, context.Canceled) || d.Allowed() {
				t.Fatalf("%s: Wait(0) with an ended context = %+v, %v; want context.Canceled", k, d, err)
			}
			if n := counter.Count(); n != 0 {
				t.Fatalf("%s: Wait(0) with an ended context sent %d commands %v", k, n, counter.Names())
			}
			if got := l.Limiter.Statistics().Granted; got != 2 {
				t.Fatalf("%s: Statistics().Granted = %d; want 2 (Allow(2) and Wait(0))", k, got)
			}
		}
	})
}
