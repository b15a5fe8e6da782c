package semaphore

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lease"
	"github.com/coordkit/coordination/internal/waitloop"
	"github.com/coordkit/coordination/lua"
)

const primitive = "semaphore"

// MaxCapacity is the largest capacity (and so the largest number of permits
// one holder may take): 2^53-1, the largest integer the scripts' Lua
// numbers hold exactly.
const MaxCapacity = 1<<53 - 1

// Forever is what [Permit.Remaining] returns while a permit acquired (or
// refreshed) with a TTL of 0, meaning no expiry, is held: the largest
// time.Duration.
const Forever = lease.Forever

// DefaultRecheck is the default re-check period of a blocked
// [Semaphore.Acquire]; see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Semaphore is a counting semaphore of a fixed capacity on one Redis key.
// Create it with [New]; it holds no state besides its settings, so any
// number of Semaphore values (in any number of processes) may share a key,
// provided they use the same capacity. It is safe for concurrent use by
// multiple goroutines. The zero value is not usable.
type Semaphore struct {
	coord    *coordination.Coordinator
	key      string
	keys     coordination.Keys // key, prefixed once
	channel  string            // release notifications
	capacity int64
	recheck  time.Duration

	am lease.AcquireMetrics
	hm lease.Metrics
}

// Option configures a [Semaphore].
type Option func(*config) error

type config struct {
	recheck time.Duration
}

// WithRecheck sets how often a blocked [Semaphore.Acquire] re-reads the
// semaphore when no release was announced: the longest a lost Pub/Sub
// message can delay a waiter. It must be at least 1 ms. The default is
// [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return coordination.InvalidArgument("recheck", "must be at least 1ms, got %v", d)
		}
		c.recheck = d
		return nil
	}
}

// New returns a semaphore of capacity permits on key (without the
// coordinator's prefix; any bytes). It sends nothing to Redis.
//
// capacity must be between 1 and [MaxCapacity], and every process using key
// must pass the same capacity (see the package documentation).
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil, key is empty, capacity is out of range or an
// option is invalid.
func New(coord *coordination.Coordinator, key string, capacity int64, opts ...Option) (*Semaphore, error) {
	if err := coord.Check(); err != nil {
		return nil, err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return nil, err
	}
	if capacity < 1 || capacity > MaxCapacity {
		return nil, coordination.InvalidArgument("capacity", "must be between 1 and %d, got %d", int64(MaxCapacity), capacity)
	}
	cfg := config{recheck: DefaultRecheck}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	keys, err := coord.Keys(key)
	if err != nil {
		return nil, err // one key: never a slot error
	}
	s := &Semaphore{coord: coord, key: key, keys: keys, channel: coord.Channel(key), capacity: capacity, recheck: cfg.recheck}
	inst := coord.Instruments(primitive, func() any { return buildInstruments(coord) }).(instrumentSet)
	s.am, s.hm = inst.am, inst.hm
	return s, nil
}

// instrumentSet holds the coordination.semaphore.* instruments, built once
// per coordinator.
type instrumentSet struct {
	am lease.AcquireMetrics
	hm lease.Metrics
}

func buildInstruments(coord *coordination.Coordinator) instrumentSet {
	return instrumentSet{lease.AcquireMetrics{
		Wait: coord.Float64Histogram("coordination.semaphore.acquire_wait",
			"Time spent blocked in a semaphore Acquire, by result.", "s", coordination.DurationBuckets...),
		Contention: coord.Int64Counter("coordination.semaphore.contention",
			"Semaphore acquire attempts that found too few free permits.", "{attempt}"),
	}, lease.Metrics{
		Hold: coord.Float64Histogram("coordination.semaphore.hold_time",
			"Time from acquiring semaphore permits to releasing or losing them.", "s", coordination.DurationBuckets...),
		RenewalFailures: coord.Int64Counter("coordination.semaphore.renewal_failures",
			"Keep-alive renewals of semaphore permits that failed (lost permit, terminal or transient error).", "{renewal}"),
		Lost: coord.Int64Counter("coordination.semaphore.lost",
			"Semaphore permits lost while held: expired, or release outcome unknown.", "{permit}"),
		Attrs: metric.WithAttributeSet(attribute.NewSet()),
	}}
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Semaphore, which [New] never returns.
func (s *Semaphore) check() error {
	if s == nil || s.coord == nil {
		return coordination.InvalidArgument("semaphore", "must not be nil; use semaphore.New")
	}
	return nil
}

// Key returns the semaphore's key as given to [New] (without the
// coordinator's prefix).
func (s *Semaphore) Key() string { return s.key }

// Capacity returns the capacity given to [New].
func (s *Semaphore) Capacity() int64 { return s.capacity }

// TryAcquire takes one permit for ttl if one is free, in one round trip,
// and returns at once. It is TryAcquireN(ctx, 1, ttl).
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, 1, ttl, false)
}

// TryAcquireN takes n permits for ttl if n are free, all or nothing, in one
// round trip, and returns at once. It never queues: when fewer than n are
// free it returns coordination.ErrNotAcquired and changes nothing (besides
// pruning expired permits).
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms, or 0
// for permits that last until released (see the package documentation on
// recovering them after a crash). The permits expire on the server ttl
// after the script ran unless refreshed ([Permit.Refresh],
// [Permit.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when fewer than n permits are free;
// coordination.ErrInvalidArgument naming n (below 1 or above the capacity)
// or ttl (negative, or between 0 and 1 ms), with nothing sent;
// coordination.ErrCapacityMismatch when a live permit exists and the
// capacity recorded in the key differs from [Semaphore.Capacity], with
// nothing written; an error matching coordination.ErrWrongType or
// coordination.ErrBadState when the key holds something else; the hook's
// error when a hook rejects; Redis and network errors as go-redis returns
// them. When the reply was lost (timeout, cancelled context, broken
// connection) the permits may have been taken on the server: a background
// owner-checked release gives them back.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, n, ttl, false)
}

// Acquire takes one permit for ttl, waiting as long as ctx allows. It is
// AcquireN(ctx, 1, ttl).
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, 1, ttl, true)
}

// AcquireN takes n permits for ttl, all or nothing, waiting as long as ctx
// allows. It does not poll: after a refused attempt it subscribes to the
// key's release notifications, tries once more, then sleeps until a
// release is announced, the earliest live permit expires (as the server
// reported it) or the re-check period passes, and tries again. Transient
// Redis errors (see coordination.Classify) are retried with jittered
// backoff. A waiter for many permits may wait while smaller requests keep
// succeeding: there is no queue.
//
// AcquireN is admitted through hooks once, as SEMAPHORE ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause). Other errors
// are those of [Semaphore.TryAcquireN].
func (s *Semaphore) AcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, n, ttl, true)
}

func (s *Semaphore) acquire(ctx context.Context, n int64, ttl time.Duration, block bool) (*Permit, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 || n > s.capacity {
		return nil, coordination.InvalidArgument("n", "must be between 1 and the capacity %d, got %d", s.capacity, n)
	}
	if _, err := lease.TTLMillis(ttl, true); err != nil {
		return nil, err
	}
	got, err := lease.Acquire(ctx, s.coord, lease.AcquireSpec{
		Op: hooks.SemaphoreAcquire, Primitive: primitive, Key: s.key, TTL: ttl, NoExpiry: true,
		Try: func(ctx context.Context, token string, ttlMs int64) (bool, time.Duration, error) {
			a, err := s.try(ctx, token, n, ttlMs)
			return a.acquired, a.retryIn, err
		},
		Cleanup: func(ctx context.Context, token string) error {
			_, _, err := s.release(ctx, member(n, token))
			return err
		},
		Metrics: s.am,
		Wait:    waitloop.Config{Recheck: s.recheck},
	}, block)
	if err != nil {
		return nil, err
	}
	return s.newPermit(n, got, ttl), nil
}

// attempt is the decoded reply of one run of the acquire script.
type attempt struct {
	acquired bool
	retryIn  time.Duration // until the earliest live permit expires; 0 when unknown
	now      int64         // server time of the run, ms since the epoch
}

// try runs the acquire script once.
func (s *Semaphore) try(ctx context.Context, token string, n, ttlMs int64) (attempt, error) {
	cmd, err := s.coord.EvalKeys(ctx, lua.SemaphoreAcquire, s.keys, token, n, s.capacity, ttlMs)
	if err != nil {
		return attempt{}, err
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return attempt{}, err
	}
	if len(v) != 3 || v[0] < 0 || v[0] > 1 {
		return attempt{}, coordination.UnexpectedReply(lua.SemaphoreAcquire.Name(), v)
	}
	return attempt{acquired: v[0] == 1, retryIn: lease.RetryIn(v[1]), now: v[2]}, nil
}

// release runs the release script for member and returns the outcome and
// the server time it ran at.
func (s *Semaphore) release(ctx context.Context, member string) (coordination.ReleaseOutcome, int64, error) {
	cmd, err := s.coord.EvalKeys(ctx, lua.SemaphoreRelease, s.keys, member, s.channel)
	if err != nil {
		return 0, 0, err
	}
	v, err := pair(cmd.Int64Slice())
	if err != nil {
		return 0, 0, err
	}
	return lease.Outcome(v[0]), v[1], nil
}

// refresh runs the refresh script for member.
func (s *Semaphore) refresh(ctx context.Context, member string, ttlMs int64) (bool, int64, error) {
	cmd, err := s.coord.EvalKeys(ctx, lua.SemaphoreRefresh, s.keys, member, ttlMs)
	if err != nil {
		return false, 0, err
	}
	v, err := pair(cmd.Int64Slice())
	if err != nil {
		return false, 0, err
	}
	return v[0] == 1, v[1], nil
}

// verify runs the verify script for member.
func (s *Semaphore) verify(ctx context.Context, member string) (bool, int64, error) {
	cmd, err := s.coord.EvalKeys(ctx, lua.SemaphoreVerify, s.keys, member)
	if err != nil {
		return false, 0, err
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 3 {
		return false, 0, coordination.UnexpectedReply(lua.SemaphoreVerify.Name(), v)
	}
	return v[0] == 1, v[2], nil
}

// pair checks a {status, now} reply.
func pair(v []int64, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	if len(v) != 2 || v[0] < 0 || v[0] > 1 {
		return nil, coordination.UnexpectedReply("semaphore script", v)
	}
	return v, nil
}

// member is the sorted-set member of a holder of n permits.
func member(n int64, token string) string {
	return "P:" + strconv.FormatInt(n, 10) + ":" + token
}

// State is a snapshot of a semaphore's live permits at one server instant.
type State struct {
	// Capacity is the capacity recorded in the key, or 0 when the key does
	// not exist (no permit is held).
	Capacity int64
	// Used is the number of permits held by live holders.
	Used int64
	// Holders is the number of live holders (each holds one or more
	// permits).
	Holders int
	// NoExpiry is the number of live holders whose permits never expire.
	NoExpiry int
}

// Free returns the number of permits free for a caller of capacity
// capacity: capacity - Used, and never negative.
func (st State) Free(capacity int64) int64 { return max(capacity-st.Used, 0) }

// State reads the semaphore's live permits in one round trip (admitted as
// SEMAPHORE READ). It writes nothing: expired permits are left out, not
// pruned. The answer may be stale by the time it returns.
//
// Errors: an error matching coordination.ErrWrongType or
// coordination.ErrBadState when the key holds something else; the hook's
// error when a hook rejects; Redis and network errors.
func (s *Semaphore) State(ctx context.Context) (State, error) {
	if err := s.check(); err != nil {
		return State{}, err
	}
	ctx, finish, err := s.coord.Admit(ctx, hooks.SemaphoreRead, primitive)
	if err != nil {
		return State{}, err
	}
	cmd, err := s.coord.EvalKeys(ctx, lua.SemaphoreRead, s.keys)
	if err != nil {
		return State{}, finish(err)
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return State{}, finish(err)
	}
	if len(v) != 5 {
		return State{}, finish(coordination.UnexpectedReply(lua.SemaphoreRead.Name(), v))
	}
	return State{Capacity: v[0], Used: v[1], Holders: int(v[2]), NoExpiry: int(v[3])}, finish(nil)
}
