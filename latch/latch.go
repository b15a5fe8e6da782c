package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/waitloop"
	"github.com/coordkit/coordination/lua"
)

const primitive = "latch"

// MaxCount is the largest count a latch accepts: 2^53-1, the largest
// integer the scripts' Lua numbers hold exactly.
const MaxCount = 1<<53 - 1

// DefaultRecheck is the default re-read period of a waiting [Latch.Wait];
// see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Errors of the latch's operations. Compare with errors.Is.
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

// Latch is a handle on one generation of a countdown latch. It is returned
// by [Create], [Reset] and [Join] and is safe for concurrent use by
// multiple goroutines. It holds no Redis resources: drop it when done. The
// zero value is not usable.
type Latch struct {
	coord   *coordination.Coordinator
	key     string
	keys    coordination.Keys // key, prefixed once
	id      string
	gen     int64
	initial int64
	recheck time.Duration
	channel string // where this handle's writes announce changes
}

// Option configures [Create], [Reset] or [Join].
type Option func(*config) error

type config struct {
	deadline time.Duration
	keyTTL   time.Duration
	recheck  time.Duration
	keys     coordination.Keys // the key, prefixed
}

// WithDeadline gives a new generation a deadline d after its creation (on
// the server's clock): if its count has not reached zero by then, it is
// broken (see [ErrBroken]). d is rounded up to whole milliseconds and must
// be at least 1 ms. It applies to [Create] and [Reset]; [Join] ignores it.
// The default is no deadline.
func WithDeadline(d time.Duration) Option {
	return func(c *config) error {
		if _, err := coordination.Millis("deadline", d); err != nil {
			return err
		}
		c.deadline = d
		return nil
	}
}

// WithKeyTTL makes the latch key expire d after [Create] or [Reset] (not
// renewed by count-downs); waiters then return false. d is rounded up to
// whole milliseconds and must be at least 1 ms. [Join] ignores it. The
// default is no expiry: the key stays until deleted.
func WithKeyTTL(d time.Duration) Option {
	return func(c *config) error {
		if _, err := coordination.Millis("key ttl", d); err != nil {
			return err
		}
		c.keyTTL = d
		return nil
	}
}

// WithRecheck sets how often the handle's [Latch.Wait] re-reads the latch
// when nothing was announced: the longest a lost Pub/Sub message (or a
// deletion of the key) can delay a waiter. It must be at least 1 ms. The
// default is [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return coordination.InvalidArgument("recheck", "must be at least 1ms, got %v", d)
		}
		c.recheck = d
		return nil
	}
}

func options(coord *coordination.Coordinator, key string, opts []Option) (config, error) {
	if err := coord.Check(); err != nil {
		return config{}, err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return config{}, err
	}
	cfg := config{recheck: DefaultRecheck}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return config{}, err
		}
	}
	keys, err := coord.Keys(key)
	if err != nil {
		return config{}, err // one key: never a slot error
	}
	cfg.keys = keys
	return cfg, nil
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

func create(ctx context.Context, coord *coordination.Coordinator, key string, count int64, opts []Option, mode, op string) (*Latch, error) {
	cfg, err := options(coord, key, opts)
	if err != nil {
		return nil, err
	}
	if count < 0 || count > MaxCount {
		return nil, coordination.InvalidArgument("count", "must be between 0 and %d, got %d", int64(MaxCount), count)
	}
	var deadlineMs, ttlMs int64
	if cfg.deadline > 0 {
		deadlineMs, _ = coordination.Millis("deadline", cfg.deadline)
	}
	if cfg.keyTTL > 0 {
		ttlMs, _ = coordination.Millis("key ttl", cfg.keyTTL)
	}
	id, err := coordination.NewOwnerToken()
	if err != nil {
		return nil, err
	}
	l := &Latch{coord: coord, key: key, keys: cfg.keys, id: id, initial: count, recheck: cfg.recheck, channel: coord.Channel(key)}
	ctx, finish, err := coord.Admit(ctx, op, primitive)
	if err != nil {
		return nil, err
	}
	cmd, err := coord.EvalKeys(ctx, lua.LatchCreate, l.keys, id, count, deadlineMs, ttlMs, mode, l.channel)
	if err != nil {
		return nil, finish(err)
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, finish(err)
	}
	if len(v) != 5 || v[0] < 0 || v[0] > 1 {
		return nil, finish(coordination.UnexpectedReply(lua.LatchCreate.Name(), v))
	}
	if v[0] == 0 {
		return nil, answer(finish, fmt.Errorf("%w (generation %d, count %d)", ErrExists, v[1], v[2]))
	}
	l.gen = v[1]
	return l, finish(nil)
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
	cfg, err := options(coord, key, opts)
	if err != nil {
		return nil, err
	}
	ctx, finish, err := coord.Admit(ctx, hooks.LatchJoin, primitive)
	if err != nil {
		return nil, err
	}
	cmd, err := coord.EvalKeys(ctx, lua.LatchJoin, cfg.keys)
	if err != nil {
		return nil, finish(err)
	}
	l, err := decodeJoin(cmd)
	if errors.Is(err, ErrNotFound) {
		return nil, answer(finish, err)
	}
	if err != nil {
		return nil, finish(err)
	}
	l.coord, l.key, l.keys, l.recheck, l.channel = coord, key, cfg.keys, cfg.recheck, coord.Channel(key)
	return l, finish(nil)
}

// decodeJoin decodes the join script's reply {id, gen, count, initial,
// deadline, now} or {} into a partly filled Latch.
func decodeJoin(cmd *redis.Cmd) (*Latch, error) {
	v, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, ErrNotFound
	}
	if len(v) != 6 {
		return nil, coordination.UnexpectedReply(lua.LatchJoin.Name(), v)
	}
	id, ok := v[0].(string)
	nums := make([]int64, 5)
	for i := range nums {
		n, isInt := v[i+1].(int64)
		ok = ok && isInt
		nums[i] = n
	}
	if !ok || id == "" {
		return nil, coordination.UnexpectedReply(lua.LatchJoin.Name(), v)
	}
	return &Latch{id: id, gen: nums[0], initial: nums[2]}, nil
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
	if l == nil || l.coord == nil {
		return coordination.InvalidArgument("latch", "must not be nil; use latch.Create, latch.Reset or latch.Join")
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
// [ErrBroken] when its deadline passed first; an error matching
// coordination.ErrWrongType or coordination.ErrBadState when the key holds
// something else; the hook's error when a hook rejects; Redis and network
// errors. A count-down re-sent by go-redis after a lost reply is counted
// once. When the reply is lost for good the count-down may or may not have
// happened.
func (l *Latch) CountDown(ctx context.Context) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	signal, err := coordination.NewOwnerToken()
	if err != nil {
		return 0, err
	}
	ctx, finish, err := l.coord.Admit(ctx, hooks.LatchCountDown, primitive)
	if err != nil {
		return 0, err
	}
	cmd, err := l.coord.EvalKeys(ctx, lua.LatchCountDown, l.keys, l.id, signal, l.channel)
	if err != nil {
		return 0, finish(err)
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return 0, finish(err)
	}
	if len(v) != 3 {
		return 0, finish(coordination.UnexpectedReply(lua.LatchCountDown.Name(), v))
	}
	switch v[0] {
	case 1:
		return v[1], finish(nil)
	case 4:
		return 0, answer(finish, ErrCompleted)
	case 5:
		return v[1], answer(finish, ErrBroken)
	case 2, 3:
		return 0, answer(finish, gone(v[0]))
	}
	return 0, finish(coordination.UnexpectedReply(lua.LatchCountDown.Name(), v))
}

// answer reports a definite negative answer (stale, not found, complete,
// broken, exists) to the hooks as Succeeded, like contention: the operation
// worked and the answer was no. It returns err.
func answer(finish coordination.Finish, err error) error {
	finish(nil)
	return err
}

// gone maps the scripts' "stale" (2) and "not found" (3) statuses to
// errors.
func gone(status int64) error {
	if status == 2 {
		return ErrStaleGeneration
	}
	return ErrNotFound
}

// reading is the decoded reply of the read script.
type reading struct {
	status     int64 // 1 current, 2 stale, 3 not found, 5 broken
	count      int64
	deadlineIn time.Duration // until the deadline; 0 when none
}

func (l *Latch) read(ctx context.Context) (reading, error) {
	cmd, err := l.coord.EvalKeys(ctx, lua.LatchRead, l.keys, l.id)
	if err != nil {
		return reading{}, err
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return reading{}, err
	}
	if len(v) != 4 || (v[0] != 1 && v[0] != 2 && v[0] != 3 && v[0] != 5) {
		return reading{}, coordination.UnexpectedReply(lua.LatchRead.Name(), v)
	}
	r := reading{status: v[0], count: v[1]}
	if v[2] >= 0 {
		r.deadlineIn = time.Duration(max(v[2], 1)) * time.Millisecond
	}
	return r, nil
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
	ctx, finish, err := l.coord.Admit(ctx, hooks.LatchRead, primitive)
	if err != nil {
		return 0, err
	}
	r, err := l.read(ctx)
	if err != nil {
		return 0, finish(err)
	}
	switch r.status {
	case 1:
		return r.count, finish(nil)
	case 5:
		return r.count, answer(finish, ErrBroken)
	}
	return 0, answer(finish, gone(r.status))
}

// Wait blocks until the handle's generation reaches zero and returns true.
// It returns false, with a nil error, when the generation ends otherwise:
// the latch was reset (a newer generation) or its key deleted. It returns
// false and [ErrBroken] when the generation's deadline passed first.
//
// Wait does not poll: it subscribes to the key's notifications, reads the
// latch, and re-reads it on each notification, at the deadline, and at
// least every re-check period (see [WithRecheck]), so a lost notification
// only delays it. Transient Redis errors are retried with jittered
// backoff; other errors end the wait and are returned. It is admitted
// through hooks once, as LATCH WAIT, however long it waits.
//
// When ctx ends first, Wait returns false and context.Cause(ctx). Nothing
// is written to Redis in any case, and nothing is left running.
func (l *Latch) Wait(ctx context.Context) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	ctx, finish, err := l.coord.Admit(ctx, hooks.LatchWait, primitive)
	if err != nil {
		return false, err
	}
	var (
		done   bool
		broken bool
	)
	err = waitloop.Run(ctx, l.coord, l.key, waitloop.Config{Recheck: l.recheck}, func(ctx context.Context) (waitloop.Attempt, error) {
		r, err := l.read(ctx)
		if err != nil {
			return waitloop.Attempt{}, err
		}
		switch {
		case r.status == 1 && r.count <= 0:
			done = true
		case r.status == 1:
			return waitloop.Attempt{RetryIn: r.deadlineIn}, nil
		case r.status == 5:
			broken = true
		}
		return waitloop.Attempt{Done: true}, nil // complete, broken, stale or gone
	})
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, coordination.ErrNotAcquired):
		return false, finish(context.Cause(ctx))
	case err != nil:
		return false, finish(err)
	case broken:
		return false, answer(finish, ErrBroken)
	}
	return done, finish(nil)
}
