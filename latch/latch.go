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
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
)

const primitive = "latch"

// MaxCount is the largest count a latch accepts: 2^53-1, the largest
// integer the scripts' Lua numbers hold exactly.
const MaxCount = 1<<53 - 1

// DefaultRecheck is the default re-read period of a waiting
// [Generation.Wait]; see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Errors of the latch's operations. Compare with errors.Is. Each is a
// definite answer, not a failure: hooks learn the operation that returned
// it as Succeeded.
var (
	// ErrExists is returned by [Latch.Create] when the key already holds a
	// latch.
	ErrExists = errors.New("latch: a latch already exists at the key")

	// ErrNotFound is returned by [Latch.Join] when the key holds no latch,
	// and by [Generation.CountDown] and [Generation.Count] when the key was
	// deleted.
	ErrNotFound = errors.New("latch: no latch at the key")

	// ErrStaleGeneration is returned by [Generation.CountDown] and
	// [Generation.Count] when the latch was reset (or deleted and created
	// again) since the Generation was created or joined: that generation is
	// over, and a count-down from it never decrements the newer one.
	ErrStaleGeneration = errors.New("latch: the latch was replaced by a newer generation")

	// ErrCompleted is returned by [Generation.CountDown] when the generation
	// already reached zero.
	ErrCompleted = errors.New("latch: the latch already reached zero")

	// ErrBroken is returned by [Generation.Wait], [Generation.CountDown] and
	// [Generation.Count] when the generation's deadline (see [WithDeadline])
	// passed before its count reached zero.
	ErrBroken = errors.New("latch: the deadline passed before the latch reached zero")
)

func init() {
	// Answers, not failures: hooks see these operations as Succeeded.
	sentinel.RegisterAnswers(ErrExists, ErrNotFound, ErrStaleGeneration, ErrCompleted, ErrBroken)
}

// The attribute sets of the latch's instruments, built once.
var (
	countDownResult = map[status]metric.MeasurementOption{
		statusCurrent:  result("counted"),
		statusComplete: result("completed"),
		statusStale:    result("stale"),
		statusNotFound: result("not_found"),
		statusBroken:   result("broken"),
	}
	waitCompleted = result("completed")
	waitReplaced  = result("replaced")
	waitBroken    = result("broken")
	waitGaveUp    = result("gave_up")
	waitFailed    = result("failed")
)

func result(r string) metric.MeasurementOption {
	return instrument.Attrs(attribute.String("result", r))
}

// Latch is the countdown latch at one key, with its options. It is
// returned by [New], which sends nothing; its verbs [Latch.Create],
// [Latch.Reset] and [Latch.Join] each return a [Generation], the handle
// that counts down, reads and waits. A Latch is safe for concurrent use by
// multiple goroutines, holds no Redis resources, and may be kept for the
// key's whole life. The zero value is not usable.
type Latch struct {
	e        *engine.Engine
	key      string
	keys     engine.Keys // key, prefixed once
	deadline int64       // ms, 0: none
	keyTTL   int64       // ms, 0: none
	recheck  time.Duration
}

// Generation is the handle on one generation of a latch: the one a
// [Latch.Create] or [Latch.Reset] made, or the one current at a
// [Latch.Join]. Its count-downs, reads and waits concern that generation
// only, never a newer one (see the package documentation, Generations). It
// is safe for concurrent use by multiple goroutines and holds no Redis
// resources: drop it when done. The zero value is not usable.
type Generation struct {
	l       *Latch
	id      string
	gen     int64
	initial int64
}

// Option configures [New].
type Option func(*config) error

type config struct {
	deadline time.Duration
	keyTTL   time.Duration
	recheck  time.Duration
}

// WithDeadline gives each new generation a deadline d after its creation
// (on the server's clock): if its count has not reached zero by then, it
// is broken (see [ErrBroken]). d is rounded up to whole milliseconds and
// must be at least 1 ms. It is given to [New] and used by [Latch.Create]
// and [Latch.Reset]; [Latch.Join] ignores it (a joined generation keeps
// the deadline it was created with). The default is no deadline.
func WithDeadline(d time.Duration) Option {
	return check.AtLeast("deadline", d, time.Millisecond, func(c *config) { c.deadline = d })
}

// WithKeyTTL makes the latch key expire d after each [Latch.Create] or
// [Latch.Reset] (not renewed by count-downs); waiters then return false. d
// is rounded up to whole milliseconds and must be at least 1 ms. It is
// given to [New] and used by Create and Reset; [Latch.Join] ignores it.
// The default is no expiry: the key stays until deleted.
func WithKeyTTL(d time.Duration) Option {
	return check.AtLeast("keyTTL", d, time.Millisecond, func(c *config) { c.keyTTL = d })
}

// WithRecheck sets how often [Generation.Wait] re-reads the latch when
// nothing was announced: the longest a lost Pub/Sub message (or a deletion
// of the key) can delay a waiter. It must be at least 1 ms. It is given to
// [New] and applies to the Wait of every generation the Latch returns. The
// default is [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return check.AtLeast("recheck", d, time.Millisecond, func(c *config) { c.recheck = d })
}

// New returns the latch at key (without the coordinator's prefix; any
// bytes, at most 1 KiB). It sends nothing to Redis: the latch is created
// by [Latch.Create] or [Latch.Reset], and joined by [Latch.Join].
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil, key is empty or too long, or an option is
// invalid.
func New(coord *coordination.Coordinator, key string, opts ...Option) (*Latch, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	cfg := config{recheck: DefaultRecheck}
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	l := &Latch{e: e, key: key, keys: e.Key(key), recheck: cfg.recheck}
	if cfg.deadline > 0 {
		l.deadline, _ = check.Millis("deadline", cfg.deadline) // checked by the option
	}
	if cfg.keyTTL > 0 {
		l.keyTTL, _ = check.Millis("keyTTL", cfg.keyTTL)
	}
	return l, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Latch, which [New] never returns.
func (l *Latch) check() error {
	if l == nil || l.e == nil {
		return check.InvalidArgument("latch", "must not be nil; use latch.New")
	}
	return nil
}

// Key returns the latch's key as given to [New] (without the
// coordinator's prefix).
func (l *Latch) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Create creates the latch with a count of count, in one round trip
// (admitted as LATCH CREATE), and returns its first generation. count may
// be 0 (a latch that is complete at once) up to [MaxCount]. The
// generation gets the deadline of [WithDeadline] and the key the TTL of
// [WithKeyTTL], when given to [New].
//
// Errors: [ErrExists] when the key already holds a latch (nothing is
// changed; use [Latch.Join] or [Latch.Reset]);
// coordination.ErrInvalidArgument naming count (or latch, for a nil
// Latch), with nothing sent; an error matching coordination.ErrBadState,
// with nothing changed, when the key holds something else or a corrupt
// latch (see the package documentation, Storage); the hook's error when a
// hook rejects; Redis and network errors. A create re-sent by go-redis
// after a lost reply finds its own generation and succeeds.
func (l *Latch) Create(ctx context.Context, count int64) (*Generation, error) {
	return l.create(ctx, count, "create", hooks.LatchCreate)
}

// Reset creates the latch with a count of count, or replaces the latch
// there with a new generation, in one round trip (admitted as LATCH
// RESET), and returns the new generation. Waiters of older generations
// wake and return false; their count-downs are refused with
// [ErrStaleGeneration]. The count-down records of the old generation are
// dropped. [WithDeadline] and [WithKeyTTL] apply as for [Latch.Create].
//
// Errors are those of [Latch.Create], except that an existing latch is
// replaced, not an error.
func (l *Latch) Reset(ctx context.Context, count int64) (*Generation, error) {
	return l.create(ctx, count, "reset", hooks.LatchReset)
}

func (l *Latch) create(ctx context.Context, count int64, mode, opName string) (*Generation, error) {
	if err := l.check(); err != nil {
		return nil, engine.OpError(opName, engine.Keys{}, err)
	}
	if count < 0 || count > MaxCount {
		return nil, engine.OpError(opName, l.keys, check.InvalidArgument("count", "must be between 0 and %d, got %d", int64(MaxCount), count))
	}
	id, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	ctx, op, err := l.e.Admit(ctx, opName, primitive, l.keys)
	if err != nil {
		return nil, err
	}
	r, err := createScript.Run(ctx, l.e, l.keys, id, count, l.deadline, l.keyTTL, mode)
	if err == nil && !r.Created {
		err = fmt.Errorf("%w (generation %d, count %d)", ErrExists, r.Gen, r.Count)
	}
	if err != nil {
		return nil, op.End(err)
	}
	return &Generation{l: l, id: id, gen: r.Gen, initial: count}, op.End(nil)
}

// Join returns the latch's current generation, in one round trip
// (admitted as LATCH JOIN). Of [New]'s options only [WithRecheck] applies
// to it.
//
// Errors: [ErrNotFound] when the key holds no latch;
// coordination.ErrInvalidArgument naming latch for a nil Latch, with
// nothing sent; an error matching coordination.ErrBadState when the key
// holds something else or a corrupt latch; the hook's error when a hook
// rejects; Redis and network errors.
func (l *Latch) Join(ctx context.Context) (*Generation, error) {
	if err := l.check(); err != nil {
		return nil, engine.OpError(hooks.LatchJoin, engine.Keys{}, err)
	}
	ctx, op, err := l.e.Admit(ctx, hooks.LatchJoin, primitive, l.keys)
	if err != nil {
		return nil, err
	}
	op = op.On(l.keys)
	g, err := joinScript.Run(ctx, l.e, l.keys)
	if err == nil && !g.Found {
		err = ErrNotFound
	}
	if err != nil {
		return nil, op.End(err)
	}
	return &Generation{l: l, id: g.ID, gen: g.Gen, initial: g.Initial}, op.End(nil)
}

// Key returns the key of the generation's latch as given to [New]
// (without the coordinator's prefix).
func (g *Generation) Key() string {
	if g == nil || g.l == nil {
		return ""
	}
	return g.l.key
}

// Number returns the generation's number: 1 for a latch made by
// [Latch.Create] (or by [Latch.Reset] on an empty key), one more for each
// Reset since. A latch deleted and created again starts at 1 again; a
// Generation tells generations apart by a random id, not by this number.
func (g *Generation) Number() int64 {
	if g == nil {
		return 0
	}
	return g.gen
}

// Initial returns the count the generation started with.
func (g *Generation) Initial() int64 {
	if g == nil {
		return 0
	}
	return g.initial
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Generation, which the Latch's verbs never return.
func (g *Generation) check() error {
	if g == nil || g.l == nil || g.l.e == nil {
		return check.InvalidArgument("generation", "must not be nil; use Latch.Create, Latch.Reset or Latch.Join")
	}
	return nil
}

// CountDown counts the generation down by one, in one round trip
// (admitted as LATCH COUNT DOWN), and returns the count left. When it
// reaches 0, waiters are woken.
//
// Errors, with nothing changed: [ErrStaleGeneration] when the latch was
// replaced since the generation was created or joined; [ErrNotFound] when the key was
// deleted; [ErrCompleted] when the generation already reached zero;
// [ErrBroken] (with the count at which the generation broke) when its
// deadline passed first; an error matching coordination.ErrBadState
// when the key holds something else or a corrupt latch; the hook's error
// when a hook rejects; Redis and network errors. A count-down
// re-sent by go-redis after a lost reply is counted once. When the reply
// is lost for good the count-down may or may not have happened.
func (g *Generation) CountDown(ctx context.Context) (int64, error) {
	if err := g.check(); err != nil {
		return 0, engine.OpError(hooks.LatchCountDown, engine.Keys{}, err)
	}
	signal, err := engine.NewToken()
	if err != nil {
		return 0, err
	}
	ctx, op, err := g.l.e.Admit(ctx, hooks.LatchCountDown, primitive, g.l.keys)
	if err != nil {
		return 0, err
	}
	r, err := countDownScript.Run(ctx, g.l.e, g.l.keys, g.id, signal)
	if err != nil {
		return 0, op.End(err)
	}
	g.l.e.Count(countDowns, countDownResult[r.Status])
	return r.Remaining, op.End(statusErr(r.Status))
}

// Count returns the count left in the generation (0 once
// complete), in one round trip (admitted as LATCH READ). It writes
// nothing.
//
// Errors: [ErrBroken], together with the count at which the generation
// broke; [ErrStaleGeneration]; [ErrNotFound]; an error matching
// coordination.ErrBadState when the key holds something else or a corrupt
// latch; the hook's error;
// Redis and network errors.
func (g *Generation) Count(ctx context.Context) (int64, error) {
	if err := g.check(); err != nil {
		return 0, engine.OpError(hooks.LatchRead, engine.Keys{}, err)
	}
	ctx, op, err := g.l.e.Admit(ctx, hooks.LatchRead, primitive, g.l.keys)
	if err != nil {
		return 0, err
	}
	r, err := readScript.Run(ctx, g.l.e, g.l.keys, g.id)
	if err != nil {
		return 0, op.End(err)
	}
	return r.Count, op.End(statusErr(r.Status))
}

// statusErr is what [Generation.CountDown] and [Generation.Count] answer
// for the status a script found: nil for the current generation,
// [ErrBroken], [ErrCompleted] (count-down only), [ErrStaleGeneration] or
// [ErrNotFound]. The strict decoders give every status but the current
// and the broken one a count of 0, which is what the callers return then.
func statusErr(s status) error {
	switch s {
	case statusCurrent:
		return nil
	case statusBroken:
		return ErrBroken
	case statusComplete:
		return ErrCompleted
	case statusStale:
		return ErrStaleGeneration
	default: // statusNotFound; the decoders admit nothing else
		return ErrNotFound
	}
}

// Wait blocks until the generation reaches zero and returns true.
// It returns false, with a nil error, when the generation ends otherwise:
// the latch was reset (a newer generation) or its key deleted. It returns
// false and [ErrBroken] when the generation's deadline passed first.
//
// Wait does not poll: it reads the latch, subscribes to the key's
// notifications when it has to wait, reads again, and re-reads on each
// notification, at the deadline, and at least every re-check period (see
// [WithRecheck]), so a lost notification only delays it. Transient Redis
// errors are retried with jittered backoff; other errors (an error
// matching coordination.ErrBadState for a key that holds something else or
// a corrupt latch) end the wait and are returned. It is admitted through
// hooks once, as LATCH WAIT, however long it waits (Canceled when ctx ends
// first).
//
// When ctx ends first, Wait returns false and an error naming the
// operation and the key (coordination: latch wait "KEY": ...), as every
// blocking operation that gave up does (see coordination.ErrNotAcquired):
// when Redis answered its last read, one that matches both
// coordination.ErrNotAcquired and context.Cause(ctx) with errors.Is; when
// that read failed (Redis unreachable) or Redis answered none, one that
// matches ctx's cause and that failure, not ErrNotAcquired (`...: context
// deadline exceeded; the last attempt failed: ...`); when ctx had ended
// before the first read, ctx's cause alone. Nothing is written to Redis in
// any case, and nothing is left running.
func (g *Generation) Wait(ctx context.Context) (bool, error) {
	if err := g.check(); err != nil {
		return false, engine.OpError(hooks.LatchWait, engine.Keys{}, err)
	}
	ctx, op, err := g.l.e.Admit(ctx, hooks.LatchWait, primitive, g.l.keys)
	if err != nil {
		return false, err
	}
	op = op.On(g.l.keys)
	start := time.Now()
	var final status
	err = g.l.e.Wait(ctx, engine.WaitConfig{Key: g.l.keys.Full()[0], Recheck: g.l.recheck}, func(ctx context.Context) (engine.Attempt, error) {
		r, err := readScript.Run(ctx, g.l.e, g.l.keys, g.id)
		if err != nil {
			return engine.Attempt{}, err
		}
		if r.Status == statusCurrent && r.Count > 0 {
			return engine.Attempt{RetryIn: r.DeadlineIn}, nil
		}
		final = r.Status // complete, broken, stale or gone
		return engine.Attempt{Done: true}, nil
	})
	record := func(res metric.MeasurementOption) {
		g.l.e.Histogram(waits).Record(context.Background(), time.Since(start).Seconds(), res)
	}
	switch {
	case err != nil && engine.Classify(err) == engine.Canceled && ctx.Err() != nil:
		// The wait loop's give-up error: contention's (ErrNotAcquired)
		// only when Redis answered the last read.
		record(waitGaveUp)
		return false, op.End(err)
	case err != nil:
		record(waitFailed)
		return false, op.End(err)
	case final == statusCurrent:
		record(waitCompleted)
		return true, op.End(nil)
	case final == statusBroken:
		record(waitBroken)
		return false, op.End(ErrBroken)
	default:
		record(waitReplaced)
		return false, op.End(nil)
	}
}
