package coordination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/lua"
)

// Client is what a [Coordinator] needs from go-redis: scripts, Pub/Sub for
// waiters, and hooks for instrumentation. *redis.Client,
// *redis.ClusterClient and the Sentinel-backed *redis.Client returned by
// redis.NewFailoverClient all satisfy it.
type Client = redis.UniversalClient

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
)

// Coordinator is the one handle every primitive needs besides its own key
// and settings: a go-redis client, a key prefix, operation hooks, a meter
// provider, a logger, and the shared Pub/Sub subscription that multiplexes
// every blocked waiter of this coordinator onto one connection.
//
// A Coordinator never closes its client. It is safe for concurrent use by
// multiple goroutines; create one per client and share it. The zero value
// is not usable; use [New].
type Coordinator struct {
	client   Client
	prefix   string
	hooks    hooks.Chain // user hooks only
	duration *hooks.DurationRecorder
	mp       metric.MeterProvider
	meter    metric.Meter
	logger   *slog.Logger

	instMu sync.Mutex
	inst   map[string]any

	hub *hub
}

// Option configures a [Coordinator].
type Option func(*config) error

type config struct {
	prefix string
	hooks  []hooks.Hook
	mp     metric.MeterProvider
	logger *slog.Logger
}

// WithKeyPrefix prepends prefix to every key every primitive of this
// coordinator touches (and to the Pub/Sub channels derived from them). The
// prefix is part of the key for Cluster slot hashing: a prefix holding a
// {hash tag} sends every key to one slot. The default is no prefix.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) error {
		c.prefix = prefix
		return nil
	}
}

// WithHooks adds operation hooks, run in the order given after any added
// earlier, as one [hooks.Chain]. A nil hook is an error. The default is no
// hooks; the coordinator records the duration histogram on its own (see
// [WithMeterProvider]).
func WithHooks(hs ...hooks.Hook) Option {
	return func(c *config) error {
		for i, h := range hs {
			if h == nil {
				return InvalidArgument("hooks", "hook %d is nil", i)
			}
		}
		c.hooks = append(c.hooks, hs...)
		return nil
	}
}

// WithMeterProvider sets the OpenTelemetry meter provider for every
// instrument of this coordinator and its primitives, including the
// coordination.operation.duration histogram (see [hooks.DurationRecorder])
// that the coordinator records for every admitted operation.
// The default is otel.GetMeterProvider(), the global provider, which is a
// no-op until the application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return InvalidArgument("meter provider", "must not be nil")
		}
		c.mp = mp
		return nil
	}
}

// WithLogger sets the structured logger for background events the caller
// cannot see otherwise: a keep-alive renewal that failed, an owner-checked
// cleanup that was given up. Log lines never contain keys, owner tokens,
// identities or endpoints. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return InvalidArgument("logger", "must not be nil")
		}
		c.logger = l
		return nil
	}
}

// New returns a coordinator over client. It sends nothing to Redis.
//
// It returns an error wrapping [ErrInvalidArgument] when client is nil or an
// option is invalid.
func New(client Client, opts ...Option) (*Coordinator, error) {
	if isNil(client) {
		return nil, InvalidArgument("client", "must not be nil")
	}
	cfg := config{}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{
		client:   client,
		prefix:   cfg.prefix,
		hooks:    hooks.Chain(cfg.hooks),
		duration: hooks.NewDurationRecorder(cfg.mp),
		mp:       cfg.mp,
		meter:    cfg.mp.Meter(hooks.ScopeName),
		logger:   cfg.logger,
		inst:     map[string]any{},
	}
	c.hub = newHub(c)
	return c, nil
}

func isNil(c Client) bool {
	if c == nil {
		return true
	}
	switch v := c.(type) {
	case *redis.Client:
		return v == nil
	case *redis.ClusterClient:
		return v == nil
	case *redis.Ring:
		return v == nil
	}
	return false
}

// Client returns the go-redis client the coordinator was created with.
func (c *Coordinator) Client() Client { return c.client }

// Prefix returns the key prefix (empty when none was set).
func (c *Coordinator) Prefix() string { return c.prefix }

// Key returns key with the coordinator's prefix prepended: the name under
// which the key is stored in Redis.
func (c *Coordinator) Key(key string) string { return c.prefix + key }

// Logger returns the coordinator's logger (never nil).
func (c *Coordinator) Logger() *slog.Logger { return c.logger }

// Meter returns the OpenTelemetry meter for the library's instruments.
func (c *Coordinator) Meter() metric.Meter { return c.meter }

// Check returns an error wrapping [ErrInvalidArgument] when c is nil. Every
// primitive calls it before anything else so that a nil coordinator is a
// clear error rather than a panic.
func (c *Coordinator) Check() error {
	if c == nil || c.client == nil {
		return InvalidArgument("coord", "must not be nil; use coordination.New")
	}
	return nil
}

// CheckKey returns an error wrapping [ErrInvalidArgument] naming name when
// key is empty. Keys are otherwise binary-safe: any bytes are allowed.
func CheckKey(name, key string) error {
	if key == "" {
		return InvalidArgument(name, "must not be empty")
	}
	return nil
}

// Finish reports an operation's outcome to the hooks that admitted it. It
// returns err unchanged so that it can end a function:
//
//	return v, finish(err)
type Finish func(err error) error

// Admit admits op through the coordinator's hooks before any Redis work.
// On rejection it returns an error naming the operation and wrapping the
// hook's error, and the operation must not touch Redis. On success the
// returned Finish must be called exactly once with the operation's final
// error; it classifies the outcome: nil is Succeeded, a context error is
// Canceled, anything else is Failed.
func (c *Coordinator) Admit(ctx context.Context, name, primitive string) (context.Context, Finish, error) {
	start := time.Now()
	var done hooks.Done
	if len(c.hooks) > 0 {
		next, d, err := c.hooks.Admit(ctx, hooks.Operation{Name: name, Primitive: primitive})
		if err != nil {
			return ctx, nil, fmt.Errorf("coordination: %s rejected by hook: %w", name, err)
		}
		if next != nil {
			ctx = next
		}
		done = d
	}
	return ctx, func(err error) error {
		o := outcomeOf(err)
		c.duration.Record(name, o, time.Since(start))
		if done != nil {
			done(o, err)
		}
		return err
	}, nil
}

func outcomeOf(err error) hooks.Outcome {
	switch {
	case err == nil:
		return hooks.Succeeded
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return hooks.Canceled
	default:
		return hooks.Failed
	}
}

// Eval runs one script as one round trip: EVALSHA, or EVAL after a NOSCRIPT
// reply. keys are the primitive's keys without the prefix; Eval prepends
// the coordinator's prefix to each. With more than one key it first checks
// that all prefixed keys hash to one Cluster slot and returns an error
// wrapping [ErrCrossSlot] without sending anything when they do not.
//
// Error replies whose text carries a COORD_ code come back as
// *[ScriptError]; redis.Nil (a Lua false) and every other error come back
// unchanged. Eval does not admit the operation: callers call [Coordinator.Admit]
// once per public operation and then Eval as many times as it needs.
func (c *Coordinator) Eval(ctx context.Context, s *lua.Script, keys []string, args ...any) (*redis.Cmd, error) {
	k, err := c.Keys(keys...)
	if err != nil {
		return nil, err
	}
	return c.EvalKeys(ctx, s, k, args...)
}

// Keys are a primitive's keys with the coordinator's prefix applied and
// their Cluster slot checked, built once by [Coordinator.Keys] and passed to
// [Coordinator.EvalKeys] on hot paths (a held lease's refresh and
// release). The zero value has no keys.
type Keys struct {
	full []string
}

// Full returns the prefixed keys. The slice must not be modified.
func (k Keys) Full() []string { return k.full }

// Keys applies the prefix to keys (unprefixed, as the caller gave them) and,
// with more than one key, checks that they hash to one Cluster slot,
// returning an error wrapping [ErrCrossSlot] when they do not.
func (c *Coordinator) Keys(keys ...string) (Keys, error) {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = c.prefix + k
	}
	if len(full) > 1 {
		if err := SameSlot(full...); err != nil {
			return Keys{}, err
		}
	}
	return Keys{full: full}, nil
}

// EvalKeys is [Coordinator.Eval] with keys prepared by [Coordinator.Keys].
func (c *Coordinator) EvalKeys(ctx context.Context, s *lua.Script, k Keys, args ...any) (*redis.Cmd, error) {
	cmd := s.Run(ctx, c.client, k.full, args...)
	if err := cmd.Err(); err != nil {
		return cmd, mapScriptError(err)
	}
	return cmd, nil
}

// Instruments returns the value that build made the first time Instruments
// was called with this name on this coordinator, calling build then.
// Primitives keep their sets of instruments (and precomputed attribute
// sets) here, so that they are built once per coordinator rather than per
// operation.
func (c *Coordinator) Instruments(name string, build func() any) any {
	c.instMu.Lock()
	v, ok := c.inst["set:"+name]
	c.instMu.Unlock()
	if ok {
		return v
	}
	v = build() // outside the lock: build creates instruments
	c.instMu.Lock()
	defer c.instMu.Unlock()
	if prev, ok := c.inst["set:"+name]; ok {
		return prev
	}
	c.inst["set:"+name] = v
	return v
}
