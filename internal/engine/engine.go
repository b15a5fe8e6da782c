// Package engine is the machinery every primitive of the library is built
// on, and nothing else: key prefixing and Cluster slot checks, script runs
// with one strict reply decoder per script, hook admission and outcome,
// the notification hub, the instrument table, the wait loop, the lease
// handle (local deadline, keep-alive, release) and background cleanup.
//
// The public face is package coordination: its Coordinator wraps an
// *Engine, and primitives reach it with [Of]. Nothing here is public API.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordination/hooks"
)

// Engine is the shared state behind one coordinator: a go-redis client, a
// key prefix, hooks, instruments, a logger, the notification hub and the
// background cleanups. It is safe for concurrent use.
type Engine struct {
	client  redis.UniversalClient
	prefix  string
	hooks   hooks.Chain
	resends bool // the client may re-send a command after a lost reply
	acks    replicaAcks
	logger  *slog.Logger
	meter   metric.Meter

	duration *durationRecorder
	inst     instruments
	hub      *hub
	cleanup  cleanups
	fences   fenceWatch
}

// Config is what [New] needs besides the client.
type Config struct {
	Prefix        string
	Hooks         []hooks.Hook
	MeterProvider metric.MeterProvider
	Logger        *slog.Logger
	// ReplicaAcks, when above 0, makes every script call wait (WAIT in the
	// same pipeline) until that many replicas acknowledged its writes, for
	// at most ReplicaAckTimeout; see [CheckReplicaAcks].
	ReplicaAcks       int
	ReplicaAckTimeout time.Duration
}

// New returns an engine over client. It sends nothing to Redis.
func New(client redis.UniversalClient, cfg Config) *Engine {
	e := &Engine{
		client:  client,
		prefix:  cfg.Prefix,
		hooks:   hooks.Chain(cfg.Hooks),
		resends: resends(client),
		logger:  cfg.Logger,
		meter:   cfg.MeterProvider.Meter(ScopeName),
		acks:    replicaAcks{n: cfg.ReplicaAcks, timeout: cfg.ReplicaAckTimeout},
	}
	e.duration = newDurationRecorder(e.meter)
	e.inst.init(e.meter)
	e.hub = newHub(e)
	return e
}

// resends reports whether client may re-send a command after a lost reply
// or a retryable error reply (go-redis MaxRetries, and for a Cluster client
// its redirects too). Unknown client types are assumed to.
func resends(c redis.UniversalClient) bool {
	switch v := c.(type) {
	case *redis.Client:
		return v.Options().MaxRetries > 0
	case *redis.ClusterClient:
		o := v.Options()
		return o.MaxRetries > 0 || o.MaxRedirects > 0
	case *redis.Ring:
		return v.Options().MaxRetries > 0
	}
	return true
}

var (
	unwrapMu sync.RWMutex
	unwrap   func(any) *Engine
)

// SetUnwrap installs the function [Of] uses to reach the engine of a
// coordinator. Package coordination calls it once, at initialisation.
func SetUnwrap(f func(any) *Engine) {
	unwrapMu.Lock()
	unwrap = f
	unwrapMu.Unlock()
}

// Of returns the engine of coord (a *coordination.Coordinator), or an error
// wrapping [ErrInvalidArgument] naming "coord" when coord is nil.
func Of(coord any) (*Engine, error) {
	unwrapMu.RLock()
	f := unwrap
	unwrapMu.RUnlock()
	if f != nil {
		if e := f(coord); e != nil {
			return e, nil
		}
	}
	return nil, InvalidArgument("coord", "must not be nil; use coordination.New")
}

// Client returns the go-redis client.
func (e *Engine) Client() redis.UniversalClient { return e.client }

// Prefix returns the key prefix.
func (e *Engine) Prefix() string { return e.prefix }

// Logger returns the logger (never nil).
func (e *Engine) Logger() *slog.Logger { return e.logger }

// Ambiguous reports whether an operation that ended with err may have
// written on the server: [IsAmbiguous], except that when the client never
// re-sends (MaxRetries -1) an error reply, a failed dial or a pool timeout
// proves the one attempt did not run.
func (e *Engine) Ambiguous(err error) bool {
	if !IsAmbiguous(err) {
		return false
	}
	return e.resends || !neverSent(err)
}

// Keys are a primitive's keys with the prefix applied and their Cluster
// slot checked, built once per operation (or per handle) by [Engine.Keys]
// or [Engine.Key]. The zero value has no keys.
type Keys struct{ full []string }

// Full returns the prefixed keys. The slice must not be modified.
func (k Keys) Full() []string { return k.full }

// First returns the first key alone.
func (k Keys) First() Keys { return Keys{full: k.full[:1:1]} }

// Key applies the prefix to one key.
func (e *Engine) Key(key string) Keys { return Keys{full: []string{e.prefix + key}} }

// Keys applies the prefix to keys and, with more than one key, checks that
// they hash to one Cluster slot, returning an error wrapping
// [ErrCrossSlot] (and sending nothing) when they do not.
func (e *Engine) Keys(keys ...string) (Keys, error) {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = e.prefix + k
	}
	if err := SameSlot(full...); err != nil {
		return Keys{}, err
	}
	return Keys{full: full}, nil
}

// CheckKey returns an error wrapping [ErrInvalidArgument] naming name when
// key is empty. Keys are otherwise binary-safe.
func CheckKey(name, key string) error {
	if key == "" {
		return InvalidArgument(name, "must not be empty")
	}
	return nil
}

// Millis converts a duration to the integer milliseconds the scripts take,
// rounding a sub-millisecond part up (never shortening a lease or window),
// and returns an error naming name when d is below one millisecond.
func Millis(name string, d time.Duration) (int64, error) {
	if d < time.Millisecond {
		return 0, InvalidArgument(name, "must be at least 1ms, got %v", d)
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms, nil
}

// TTLMillis is Millis("ttl", ttl), except that 0 (no expiry) gives 0 when
// noExpiry is set.
func TTLMillis(ttl time.Duration, noExpiry bool) (int64, error) {
	if ttl == 0 && noExpiry {
		return 0, nil
	}
	return Millis("ttl", ttl)
}

// NewToken returns a fresh random owner token: a version 4 UUID in its
// 36-character text form (122 random bits from crypto/rand).
func NewToken() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("coordination: owner token: %w", err)
	}
	return u.String(), nil
}

// Op is one admitted public operation. Its End must be called exactly once.
type Op struct {
	e     *Engine
	name  string
	start time.Time
	done  hooks.Done
}

// Admit admits the operation name of primitive through the hooks, before
// any Redis work. On rejection it returns an error naming the operation and
// wrapping the hook's error, and the caller must not touch Redis.
func (e *Engine) Admit(ctx context.Context, name, primitive string) (context.Context, Op, error) {
	op := Op{e: e, name: name, start: time.Now()}
	if len(e.hooks) > 0 {
		next, done, err := e.hooks.Admit(ctx, hooks.Operation{Name: name, Primitive: primitive})
		if err != nil {
			return ctx, Op{}, fmt.Errorf("coordination: %s rejected by hook: %w", name, err)
		}
		if next != nil {
			ctx = next
		}
		op.done = done
	}
	return ctx, op, nil
}

// End reports the operation's outcome ([OutcomeOf] err) to the hooks and
// the duration histogram, and returns err unchanged.
func (o Op) End(err error) error {
	if o.e == nil {
		return err
	}
	out := OutcomeOf(err)
	o.e.duration.record(o.name, out, time.Since(o.start))
	if o.done != nil {
		o.done(out, err)
	}
	return err
}

// OutcomeOf is the one place the library decides how an operation's error
// counts for hooks: nil and answers ([Answer], such as ErrNotAcquired for a
// contended TryAcquire) are Succeeded; a blocking wait that gave up and
// context errors are Canceled; everything else is Failed.
func OutcomeOf(err error) hooks.Outcome {
	switch {
	case err == nil:
		return hooks.Succeeded
	case Classify(err) == Canceled:
		return hooks.Canceled
	case IsAnswer(err):
		return hooks.Succeeded
	default:
		return hooks.Failed
	}
}

// Apply applies functional options to cfg in order, skipping nil ones, and
// returns the first option's error: the one option style of the library
// (type Option func(*config) error, built by WithX functions).
func Apply[T any, O ~func(*T) error](cfg *T, opts []O) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(cfg); err != nil {
			return err
		}
	}
	return nil
}

// AtLeast returns an option that calls set when v, a duration or a count,
// is at least least, and otherwise fails naming name: "must be at least
// <least>, got v" or, for least 0, "must not be negative, got v" (for a
// duration with least 1 ms, the check and the error of [Millis]). Like
// every option it checks when it is applied, not when it is built. Its
// result converts to a package's named option type (type Option
// func(*config) error).
func AtLeast[T any, N ~int | ~int64](name string, v, least N, set func(*T)) func(*T) error {
	return func(cfg *T) error {
		switch {
		case v >= least:
			set(cfg)
			return nil
		case least == 0:
			return InvalidArgument(name, "must not be negative, got %v", v)
		default:
			return InvalidArgument(name, "must be at least %v, got %v", least, v)
		}
	}
}
