package ratelimit

import (
	"context"
	"math"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
)

// maxDurationMs bounds every duration setting, in milliseconds, so that
// server time plus any window, refill or burst span stays an exact integer
// in a Lua number (below 2^53) for the next few thousand years.
const maxDurationMs = int64(1) << 50 / 1000

// maxLimit bounds every permit count setting.
const maxLimit = math.MaxInt32

// FixedWindow configures a fixed-window limiter ([NewFixedWindow]).
//
// The window starts at the first acquisition that finds no live window for
// the key, not at a clock-aligned boundary, and lasts Window; up to Limit
// permits are granted in it, then the count resets when it ends. Requests on
// both sides of a window's end can use two windows' budgets close together.
type FixedWindow struct {
	// Limit is the number of permits per window (1 or more).
	Limit int
	// Window is the window length, at least 1 ms, rounded up to whole
	// milliseconds.
	Window time.Duration
}

// SlidingWindow configures a segmented sliding-window limiter
// ([NewSlidingWindow]).
//
// Time is cut into Segments segments per Window, each
// ceil(Window/Segments) long, aligned to server time. Permits taken during a
// segment are returned one Window after that segment ends: never earlier
// than one Window after they were taken, and at most one segment later. So
// no span of one Window ever admits more than Limit permits. More segments
// return permits more promptly and store a few more hash fields.
type SlidingWindow struct {
	// Limit is the number of permits per window (1 or more).
	Limit int
	// Window is the window length, at least 1 ms, rounded up to whole
	// milliseconds.
	Window time.Duration
	// Segments is the number of segments per window, 1 to 1024.
	Segments int
}

// TokenBucket configures a token-bucket limiter ([NewTokenBucket]).
//
// A bucket nobody has used is full (Limit tokens). Each whole Period since
// the bucket last dropped below full adds TokensPerPeriod tokens, up to
// Limit; a partial period is kept until it completes. Refill is computed
// from server time on each use; no timer runs anywhere.
type TokenBucket struct {
	// Limit is the bucket capacity and so the largest burst (1 or more).
	Limit int
	// TokensPerPeriod is the number of tokens added per whole period (1 or
	// more).
	TokensPerPeriod int
	// Period is the refill period, at least 1 ms, rounded up to whole
	// milliseconds.
	Period time.Duration
}

// GCRA configures a Generic Cell Rate Algorithm limiter ([NewGCRA]): the
// virtual-scheduling algorithm of the ATM Forum's Traffic Management
// Specification 4.0, as applied to rate limiting in Brandur Leach's "Rate
// Limiting, Cells, and GCRA" and in go-redis/redis_rate, here with integer
// milliseconds.
//
// Burst permits may be taken at once; after that one permit becomes
// available every Interval (a sustained rate of 1/Interval). Only one
// timestamp (the theoretical arrival time) is stored. A batch of permits is
// granted whole or not at all; rejected requests and probes write nothing.
type GCRA struct {
	// Burst is the total burst capacity, not an allowance on top of the
	// steady rate (1 or more).
	Burst int
	// Interval is the emission interval: the time one permit takes to come
	// back. At least 1 ms, rounded up to whole milliseconds.
	Interval time.Duration
}

// Concurrency configures a concurrency limiter ([NewConcurrency]): at most
// Limit permits are held at once by live leases across every process.
//
// Each acquired lease is an entry in a sorted set that expires
// LeaseDuration after its last renewal; the lease renews itself every
// LeaseDuration/3 while held and returns its permits on [Lease.Release]. A
// holder that crashes frees its permits when its entry expires. Refusals
// carry no RetryAfter: nobody knows when a holder finishes.
type Concurrency struct {
	// Limit is the number of permits that may be held at once (1 or more).
	Limit int
	// LeaseDuration is how long a lease survives without renewal; at least
	// 30 ms, rounded up to whole milliseconds. Zero means 30 s.
	LeaseDuration time.Duration
}

// count is a permit-count setting of a limiter: its name in errors and its
// value.
type count struct {
	name string
	n    int
}

// newChecked returns a new limiter (coordinator, key and options checked by
// newLimiter) once the settings every algorithm has are valid, checked in
// this order: the counts, each 1 to maxLimit (the first is the limiter's
// capacity), then the duration named durName, from least (1 ms or more)
// to maxDurationMs. It returns that duration in whole milliseconds, rounded
// up.
func newChecked(coord *coordination.Coordinator, key string, opts []Option, durName string, d, least time.Duration, counts ...count) (*Limiter, int64, error) {
	l, err := newLimiter(coord, key, counts[0].n, opts)
	if err != nil {
		return nil, 0, err
	}
	for _, c := range counts {
		if c.n < 1 || c.n > maxLimit {
			return nil, 0, engine.InvalidArgument(c.name, "must be between 1 and %d, got %d", maxLimit, c.n)
		}
	}
	if d < least {
		return nil, 0, engine.InvalidArgument(durName, "must be at least %v, got %v", least, d)
	}
	ms, err := engine.Millis(durName, d)
	if err != nil {
		return nil, 0, err
	}
	if ms > maxDurationMs {
		return nil, 0, engine.InvalidArgument(durName, "must be at most %v, got %v", time.Duration(maxDurationMs)*time.Millisecond, d)
	}
	return l, ms, nil
}

// NewFixedWindow returns a fixed-window limiter on key (see [FixedWindow]).
// It sends nothing to Redis.
//
// State: one string with the settings, the count and the window's end,
// expiring when the window ends.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty), "limit" (below 1), "window" (below 1 ms), or the
// invalid option's.
func NewFixedWindow(coord *coordination.Coordinator, key string, cfg FixedWindow, opts ...Option) (*Limiter, error) {
	l, w, err := newChecked(coord, key, opts, "window", cfg.Window, time.Millisecond, count{"limit", cfg.Limit})
	if err != nil {
		return nil, err
	}
	l.try = l.scriptTry(engine.RateLimitFixed, int64(cfg.Limit), w)
	return l, nil
}

// NewSlidingWindow returns a segmented sliding-window limiter on key (see
// [SlidingWindow]). It sends nothing to Redis.
//
// State: one hash with the settings, the total and one field per segment
// that still holds permits; it expires when the newest segment's permits
// are returned. A rejected request costs one more field read per live
// segment to compute RetryAfter.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty), "limit" (below 1), "window" (below 1 ms),
// "segments" (outside 1..1024), or the invalid option's.
func NewSlidingWindow(coord *coordination.Coordinator, key string, cfg SlidingWindow, opts ...Option) (*Limiter, error) {
	l, w, err := newChecked(coord, key, opts, "window", cfg.Window, time.Millisecond, count{"limit", cfg.Limit})
	if err != nil {
		return nil, err
	}
	if cfg.Segments < 1 || cfg.Segments > 1024 {
		return nil, engine.InvalidArgument("segments", "must be between 1 and 1024, got %d", cfg.Segments)
	}
	l.try = l.scriptTry(engine.RateLimitSliding, int64(cfg.Limit), w, int64(cfg.Segments))
	return l, nil
}

// NewTokenBucket returns a token-bucket limiter on key (see [TokenBucket]).
// It sends nothing to Redis.
//
// State: one string with the settings, the token count and the start of the
// current refill period; it expires when the bucket would be full again.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty), "limit" or "tokensPerPeriod" (below 1), "period"
// (below 1 ms, or a refill span ceil(Limit/TokensPerPeriod) × Period
// beyond about 35 years), or the invalid option's.
func NewTokenBucket(coord *coordination.Coordinator, key string, cfg TokenBucket, opts ...Option) (*Limiter, error) {
	l, p, err := newChecked(coord, key, opts, "period", cfg.Period, time.Millisecond,
		count{"limit", cfg.Limit}, count{"tokensPerPeriod", cfg.TokensPerPeriod})
	if err != nil {
		return nil, err
	}
	// The time to refill an empty bucket, ceil(Limit/TokensPerPeriod)
	// periods, must stay an exact integer in the script (it sets the key's
	// expiry).
	if refills := (int64(cfg.Limit) + int64(cfg.TokensPerPeriod) - 1) / int64(cfg.TokensPerPeriod); p > maxDurationMs/refills {
		return nil, engine.InvalidArgument("period", "the time to refill an empty bucket, ceil(limit / tokens per period) × period, must be at most %v", time.Duration(maxDurationMs)*time.Millisecond)
	}
	l.try = l.scriptTry(engine.RateLimitBucket, int64(cfg.Limit), int64(cfg.TokensPerPeriod), p)
	return l, nil
}

// NewGCRA returns a GCRA limiter on key (see [GCRA]). It sends nothing to
// Redis.
//
// State: one string with the settings and the theoretical arrival time; it
// expires when the full burst is available again.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty), "burst" (below 1, or a burst span Burst × Interval
// beyond about 35 years), "interval" (below 1 ms), or the invalid option's.
func NewGCRA(coord *coordination.Coordinator, key string, cfg GCRA, opts ...Option) (*Limiter, error) {
	l, iv, err := newChecked(coord, key, opts, "interval", cfg.Interval, time.Millisecond, count{"burst", cfg.Burst})
	if err != nil {
		return nil, err
	}
	if iv > maxDurationMs/int64(cfg.Burst) {
		return nil, engine.InvalidArgument("burst", "burst × interval must be at most %v", time.Duration(maxDurationMs)*time.Millisecond)
	}
	l.try = l.scriptTry(engine.RateLimitGCRA, int64(cfg.Burst), iv)
	return l, nil
}

// scriptTry returns the tryFunc of a window, bucket or GCRA script whose
// ARGV are settings followed by the permits. Argument lists for small permit
// counts are built once, so the hot path allocates none.
func (l *Limiter) scriptTry(s *engine.Script[engine.Decision], settings ...any) tryFunc {
	const cached = 8
	var pre [cached + 1][]any
	for p := range pre {
		pre[p] = append(append(make([]any, 0, len(settings)+1), settings...), p)
	}
	return func(ctx context.Context, permits int) (decision, error) {
		var args []any
		if permits <= cached {
			args = pre[permits]
		} else {
			args = append(append(make([]any, 0, len(settings)+1), settings...), permits)
		}
		r, err := s.Run(ctx, l.e, l.keys, args...)
		if err != nil {
			return decision{}, err
		}
		return decision{acquired: r.Acquired, available: r.Available, retry: r.RetryIn, hasRetry: r.HasRetry}, nil
	}
}
