package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

const primitive = "latch"

// MaxCount is the largest count a latch accepts: 2^53-1, the largest
// integer the scripts' Lua numbers hold exactly.
const MaxCount = 1<<53 - 1

// DefaultRecheck is the default re-read period of a waiting [Latch.Wait];
// see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Errors of the latch's operations. Compare with errors.Is. Each is a
// definite answer, not a failure: hooks learn the operation that returned
// it as Succeeded.
var (
	// ErrExists is returned by [Create] when the key already holds a
	// latch.
	ErrExists = errors.New("latch: a latch already exists at the key")

	// ErrNotFound is returned by [Join] when the key holds no latch, and by
	// [Latch.CountDown] and [Latch.Count] when the key was deleted.
	ErrNotFound = errors.New("latch: no latch at the key")

	// ErrStaleGeneration is returned by [Latch.CountDown] and [Latch.Count]
	// when the latch was reset (or deleted and created again) since the
	// handle created or joined it: the handle's generation is over, and a
	// count-down from it never decrements the newer one.
	ErrStaleGeneration = errors.New("latch: the latch was replaced by a newer generation")

	// ErrCompleted is returned by [Latch.CountDown] when the generation
	// already reached zero.
	ErrCompleted = errors.New("latch: the latch already reached zero")

	// ErrBroken is returned by [Latch.Wait], [Latch.CountDown] and
	// [Latch.Count] when the generation's deadline (see [WithDeadline])
	// passed before its count reached zero.
	ErrBroken = errors.New("latch: the deadline passed before the latch reached zero")
)

func init() {
	// Answers, not failures: hooks see these operations as Succeeded.
	engine.RegisterAnswers(ErrExists, ErrNotFound, ErrStaleGeneration, ErrCompleted, ErrBroken)
}

// The attribute sets of the latch's instruments, built once.
var (
	countDownResult = map[engine.LatchStatus]metric.MeasurementOption{
		engine.LatchCurrent:  result("counted"),
		engine.LatchComplete: result("completed"),
		engine.LatchStale:    result("stale"),
		engine.LatchNotFound: result("not_found"),
		engine.LatchBroken:   result("broken"),
	}
	waitCompleted = result("completed")
	waitReplaced  = result("replaced")
	waitBroken    = result("broken")
	waitGaveUp    = result("gave_up")
	waitFailed    = result("failed")
)

func result(r string) metric.MeasurementOption {
	return engine.Attrs(attribute.String("result", r))
}

// Latch is a handle on one generation of a countdown latch. It is returned
// by [Create], [Reset] and [Join] and is safe for concurrent use by
// multiple goroutines. It holds no Redis resources: drop it when done. The
// zero value is not usable.
type Latch struct {
	e       *engine.Engine
	key     string
	keys    engine.Keys // key, prefixed once
	id      string
	gen     int64
	initial int64
	recheck time.Duration
}

// Option configures [Create], [Reset] or [Join].
type Option func(*config) error

type config struct {
	deadline time.Duration
	keyTTL   time.Duration
	recheck  time.Duration
}

// WithDeadline gives a new generation a deadline d after its creation (on
// the server's clock): if its count has not reached zero by then, it is
// broken (see [ErrBroken]). d is rounded up to whole milliseconds and must
// be at least 1 ms. It applies to [Create] and [Reset]; [Join] ignores it.
// The default is no deadline.
func WithDeadline(d time.Duration) Option {
	return engine.AtLeast("deadline", d, time.Millisecond, func(c *config) { c.deadline = d })
}

// WithKeyTTL makes the latch key expire d after [Create] or [Reset] (not
// renewed by count-downs); waiters then return false. d is rounded up to
// whole milliseconds and must be at least 1 ms. [Join] ignores it. The
// default is no expiry: the key stays until deleted.
func WithKeyTTL(d time.Duration) Option {
	return engine.AtLeast("key ttl", d, time.Millisecond, func(c *config) { c.keyTTL = d })
}

// WithRecheck sets how often the handle's [Latch.Wait] re-reads the latch
// when nothing was announced: the longest a lost Pub/Sub message (or a
// deletion of the key) can delay a waiter. It must be at least 1 ms. The
// default is [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return engine.AtLeast("recheck", d, time.Millisecond, func(c *config) { c.recheck = d })
}

// options validates the input common to Create, Reset and Join, sending
// nothing.
func options(coord *coordination.Coordinator, key string, opts []Option) (*engine.Engine, config, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, config{}, err
	}
	if err := engine.CheckKey("key", key); err != nil {
		return nil, config{}, err
	}
	cfg := config{recheck: DefaultRecheck}
	if err := engine.Apply(&cfg, opts); err != nil {
		return nil, config{}, err
	}
	return e, cfg, nil
}

// Create creates a latch of count at key (without the coordinator's
// prefix; any bytes), in one round trip (admitted as LATCH CREATE), and
// returns a handle on its first generation. count may be 0 (a latch that
// is complete at once) up to [MaxCount].
//
// Errors: [ErrExists] when the key already holds a latch (nothing is
// changed; use [Join] or [Reset]); coordination.ErrInvalidArgument naming
// coord, key, count or an option's argument, with nothing sent; an error
// matching coordination.ErrWrongType or coordination.ErrBadState when the
// key holds something else; the hook's error when a hook rejects; Redis
// and network errors. A create re-sent by go-redis after a lost reply
// finds its own generation and succeeds.
func Create(ctx context.Context, coord *coordination.Coordinator, key string, count int64, opts ...Option) (*Latch, error) {
	return create(ctx, coord, key, count, opts, "create", hooks.LatchCreate)
}

// Reset creates a latch of count at key, or replaces the latch there with a
// new generation, in one round trip (admitted as LATCH RESET), and returns
// a handle on the new generation. Waiters of older generations wake and
// return false; their count-downs are refused with [ErrStaleGeneration].
// The count-down records of the old generation are dropped.
//
// Errors are those of [Create], except that an existing latch is replaced,
// not an error.
func Reset(ctx context.Context, coord *coordination.Coordinator, key string, count int64, opts ...Option) (*Latch, error) {
	return create(ctx, coord, key, count, opts, "reset", hooks.LatchReset)
}

func create(ctx context.Context, coord *coordination.Coordinator, key string, count int64, opts []Option, mode, opName string) (*Latch, error) {
	e, cfg, err := options(coord, key, opts)
	if err != nil {
		return nil, err
	}
	if count < 0 || count > MaxCount {
		return nil, engine.InvalidArgument("count", "must be between 0 and %d, got %d", int64(MaxCount), count)
	}
	var deadlineMs, ttlMs int64
	if cfg.deadline > 0 {
		deadlineMs, _ = engine.Millis("deadline", cfg.deadline) // checked by the option
	}
	if cfg.keyTTL > 0 {
		ttlMs, _ = engine.Millis("key ttl", cfg.keyTTL)
	}
	id, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	l := &Latch{e: e, key: key, keys: e.Key(key), id: id, initial: count, recheck: cfg.recheck}
	ctx, op, err := e.Admit(ctx, opName, primitive)
	if err != nil {
		return nil, err
	}
	r, err := engine.LatchCreate.Run(ctx, e, l.keys, id, count, deadlineMs, ttlMs, mode)
	if err == nil && !r.Created {
		err = fmt.Errorf("%w (generation %d, count %d)", ErrExists, r.Gen, r.Count)
	}
	if err != nil {
		return nil, op.End(err)
	}
	l.gen = r.Gen
	return l, op.End(nil)
}

// Join returns a handle on the current generation of the latch at key, in
// one round trip (admitted as LATCH JOIN). Only [WithRecheck] applies.
//
// Errors: [ErrNotFound] when the key holds no latch;
// coordination.ErrInvalidArgument naming coord, key or an option's
// argument, with nothing sent; an error matching coordination.ErrWrongType
// or coordination.ErrBadState when the key holds something else; the
// hook's error when a hook rejects; Redis and network errors.
func Join(ctx context.Context, coord *coordination.Coordinator, key string, opts ...Option) (*Latch, error) {
	e, cfg, err := options(coord, key, opts)
	if err != nil {
		return nil, err
	}
	ctx, op, err := e.Admit(ctx, hooks.LatchJoin, primitive)
	if err != nil {
		return nil, err
	}
	keys := e.Key(key)
	op = op.On(keys)
	g, err := engine.LatchJoin.Run(ctx, e, keys)
	if err == nil && !g.Found {
		err = ErrNotFound
	}
	if err != nil {
		return nil, op.End(err)
	}
	return &Latch{e: e, key: key, keys: keys, id: g.ID, gen: g.Gen, initial: g.Initial, recheck: cfg.recheck}, op.End(nil)
}

// Key returns the latch's key as given (without the coordinator's prefix).
func (l *Latch) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Generation returns the handle's generation number: 1 for a latch made by
// [Create] (or by [Reset] on an empty key), one more for each Reset since.
// A latch deleted and created again starts at 1 again; the handle tells
// generations apart by a random id, not by this number.
func (l *Latch) Generation() int64 {
	if l == nil {
		return 0
	}
	return l.gen
}

// Initial returns the count the handle's generation started with.
func (l *Latch) Initial() int64 {
	if l == nil {
		return 0
	}
	return l.initial
}

func (l *Latch) check() error {
	if l == nil || l.e == nil {
		return engine.InvalidArgument("latch", "must not be nil; use latch.Create, latch.Reset or latch.Join")
	}
	return nil
}

// CountDown counts the handle's generation down by one, in one round trip
// (admitted as LATCH COUNT DOWN), and returns the count left. When it
// reaches 0, waiters are woken.
//
// Errors, with nothing changed: [ErrStaleGeneration] when the latch was
// replaced since the handle joined; [ErrNotFound] when the key was
// deleted; [ErrCompleted] when the generation already reached zero;
// [ErrBroken] (with the count at which the generation broke) when its
// deadline passed first; an error matching coordination.ErrWrongType or
// coordination.ErrBadState when the key holds something else; the hook's
// error when a hook rejects; Redis and network errors. A count-down
// re-sent by go-redis after a lost reply is counted once. When the reply
// is lost for good the count-down may or may not have happened.
func (l *Latch) CountDown(ctx context.Context) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	signal, err := engine.NewToken()
	if err != nil {
		return 0, err
	}
	ctx, op, err := l.e.Admit(ctx, hooks.LatchCountDown, primitive)
	if err != nil {
		return 0, err
	}
	r, err := engine.LatchCountDown.Run(ctx, l.e, l.keys, l.id, signal)
	if err != nil {
		return 0, op.End(err)
	}
	l.e.Count(engine.LatchCountDowns, countDownResult[r.Status])
	return r.Remaining, op.End(statusErr(r.Status))
}

// Count returns the count left in the handle's generation (0 once
// complete), in one round trip (admitted as LATCH READ). It writes
// nothing.
//
// Errors: [ErrBroken], together with the count at which the generation
// broke; [ErrStaleGeneration]; [ErrNotFound]; an error matching
// coordination.ErrWrongType or coordination.ErrBadState; the hook's error;
// Redis and network errors.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	ctx, op, err := l.e.Admit(ctx, hooks.LatchRead, primitive)
	if err != nil {
		return 0, err
	}
	r, err := engine.LatchRead.Run(ctx, l.e, l.keys, l.id)
	if err != nil {
		return 0, op.End(err)
	}
	return r.Count, op.End(statusErr(r.Status))
}

// statusErr is what [Latch.CountDown] and [Latch.Count] answer for the
// status a script found: nil for the handle's current generation,
// [ErrBroken], [ErrCompleted] (count-down only), [ErrStaleGeneration] or
// [ErrNotFound]. The strict decoders give every status but the current
// and the broken one a count of 0, which is what the callers return then.
func statusErr(s engine.LatchStatus) error {
	switch s {
	case engine.LatchCurrent:
		return nil
	case engine.LatchBroken:
		return ErrBroken
	case engine.LatchComplete:
		return ErrCompleted
	case engine.LatchStale:
		return ErrStaleGeneration
	default: // engine.LatchNotFound; the decoders admit nothing else
		return ErrNotFound
	}
}

// Wait blocks until the handle's generation reaches zero and returns true.
// It returns false, with a nil error, when the generation ends otherwise:
// the latch was reset (a newer generation) or its key deleted. It returns
// false and [ErrBroken] when the generation's deadline passed first.
//
// Wait does not poll: it reads the latch, subscribes to the key's
// notifications when it has to wait, reads again, and re-reads on each
// notification, at the deadline, and at least every re-check period (see
// [WithRecheck]), so a lost notification only delays it. Transient Redis
// errors are retried with jittered backoff; other errors end the wait and
// are returned. It is admitted through hooks once, as LATCH WAIT, however
// long it waits (Canceled when ctx ends first).
//
// When ctx ends first, Wait returns false and context.Cause(ctx). Nothing
// is written to Redis in any case, and nothing is left running.
func (l *Latch) Wait(ctx context.Context) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	ctx, op, err := l.e.Admit(ctx, hooks.LatchWait, primitive)
	if err != nil {
		return false, err
	}
	op = op.On(l.keys)
	start := time.Now()
	var final engine.LatchStatus
	err = l.e.Wait(ctx, engine.WaitConfig{Key: l.keys.Full()[0], Recheck: l.recheck}, func(ctx context.Context) (engine.Attempt, error) {
		r, err := engine.LatchRead.Run(ctx, l.e, l.keys, l.id)
		if err != nil {
			return engine.Attempt{}, err
		}
		if r.Status == engine.LatchCurrent && r.Count > 0 {
			return engine.Attempt{RetryIn: r.DeadlineIn}, nil
		}
		final = r.Status // complete, broken, stale or gone
		return engine.Attempt{Done: true}, nil
	})
	record := func(res metric.MeasurementOption) {
		l.e.Histogram(engine.LatchWaits).Record(context.Background(), time.Since(start).Seconds(), res)
	}
	switch {
	case err != nil && engine.Classify(err) == engine.Canceled && ctx.Err() != nil:
		record(waitGaveUp)
		_ = op.End(err) // a wait that gave up: Canceled
		return false, context.Cause(ctx)
	case err != nil:
		record(waitFailed)
		return false, op.End(err)
	case final == engine.LatchCurrent:
		record(waitCompleted)
		return true, op.End(nil)
	case final == engine.LatchBroken:
		record(waitBroken)
		return false, op.End(ErrBroken)
	default:
		record(waitReplaced)
		return false, op.End(nil)
	}
}
