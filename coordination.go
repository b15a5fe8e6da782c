package coordination

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// Coordinator is the one handle every primitive needs besides its own key
// and settings: a go-redis client, a key prefix, operation hooks, a meter
// provider, a tracer provider and a logger. All blocked waiters of one
// coordinator share one Pub/Sub connection.
//
// A Coordinator lives until [Coordinator.Shutdown], which ends its
// background work (keep-alives, background cleanups, the Pub/Sub
// connection) and makes every later operation of its primitives fail with
// an error wrapping [ErrClosed]. It never closes its client. It is safe for
// concurrent use by multiple goroutines; create one per client and share
// it. The zero value is not usable; use [New].
type Coordinator struct {
	e *engine.Engine
}

func init() {
	engine.Install(func(c any) *engine.Engine {
		if cc, ok := c.(*Coordinator); ok && cc != nil {
			return cc.e
		}
		return nil
	}, initLease)
}

// Option configures a [Coordinator]. Options are applied in order; an
// invalid one makes [New] fail.
type Option func(*config) error

// maxPrefixBytes bounds WithKeyPrefix's prefix: a namespace, not an
// identifier, so far below a key's 1 KiB.
const maxPrefixBytes = 256

type config struct {
	engine.Config
	acks bool // WithReplicaAcks was given
}

// WithKeyPrefix prepends prefix to every key every primitive of this
// coordinator touches (and so to the Pub/Sub channels derived from them).
// The prefix is part of the key for Cluster slot hashing: a prefix holding
// a {hash tag} sends every key to one slot. The default is no prefix. A
// prefix longer than 256 bytes makes [New] fail with an error wrapping
// [ErrInvalidArgument] naming "prefix" (keys are bounded apart, at 1 KiB
// each before the prefix).
func WithKeyPrefix(prefix string) Option {
	return func(c *config) error {
		if err := check.Size("prefix", len(prefix), maxPrefixBytes); err != nil {
			return err
		}
		c.Prefix = prefix
		return nil
	}
}

// WithHooks adds operation hooks, run in the order given after any added
// earlier (see package hooks). A nil hook is an error naming "hooks". The
// default is no hooks.
func WithHooks(hs ...hooks.Hook) Option {
	return func(c *config) error {
		for i, h := range hs {
			if h == nil {
				return check.InvalidArgument("hooks", "hook %d is nil", i)
			}
		}
		c.Hooks = append(c.Hooks, hs...)
		return nil
	}
}

// WithMeterProvider sets the OpenTelemetry meter provider of every
// instrument of this coordinator and its primitives, including the
// coordination.operation.duration histogram recorded for every admitted
// operation (attributes operation and outcome). The default is
// otel.GetMeterProvider(), the global provider, which is a no-op until the
// application installs an SDK. A nil provider is an error.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return check.InvalidArgument("meterProvider", "must not be nil")
		}
		c.MeterProvider = mp
		return nil
	}
}

// WithTracerProvider sets the OpenTelemetry tracer provider of this
// coordinator: every admitted operation of its primitives is one span
// (instrumentation scope github.com/coordkit/coordination), a child of the
// span of the caller's context, named after the operation ("LOCK
// ACQUIRE", as package hooks names it), with the attributes
// coordination.operation, coordination.primitive, coordination.outcome
// (succeeded, canceled or failed, as the hooks learn it) and, for an
// operation that blocked, coordination.wait_time (seconds, a double). A
// failed operation's status is Error, described by its class alone
// (transient or terminal). A span never records a key, an owner token, an
// identity, an endpoint or an error message (messages name keys). The
// context the operation passes to the go-redis client carries the span,
// so the spans of an instrumentation installed on the client nest under
// it. An operation refused by a hook, by [Coordinator.Shutdown] or for a
// nil context has no span.
//
// The default is otel.GetTracerProvider(), the global provider, which is
// a no-op until the application installs an SDK (otel.SetTracerProvider);
// until then, and with a no-op provider (go.opentelemetry.io/otel/trace/noop),
// no span is started at all: tracing costs nothing. A nil provider is an
// error. Spans are started and ended on the goroutine calling the
// operation; the provider must be safe for concurrent use, as every
// OpenTelemetry SDK is.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return check.InvalidArgument("tracerProvider", "must not be nil")
		}
		c.TracerProvider = tp
		return nil
	}
}

// WithLogger sets the structured logger for background events the caller
// cannot see otherwise: a keep-alive renewal that failed, a cleanup that
// was given up. Log lines never contain keys, owner tokens, identities,
// endpoints or passwords. The default discards everything but [New]'s
// warning about a client that ignores context deadlines, which goes to
// slog.Default(). A nil logger is an error.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return check.InvalidArgument("logger", "must not be nil")
		}
		c.Logger = l
		return nil
	}
}

// WithReplicaAcks makes every operation of this coordinator wait until at
// least replicas replicas have acknowledged its writes, for at most
// timeout: each script is sent with Redis' WAIT replicas timeout in one
// pipeline on one connection (to the primary of the key's slot on a
// Cluster client), so an operation is still one round trip, longer by the
// replication round trip. A reply the replicas have acknowledged survives
// a failover to one of them: without it, a failover can lose the last
// acknowledged writes (a lock, a fencing token, a consumed permit) and a
// second holder can appear.
//
// When fewer replicas acknowledge in time, the operation fails with an
// error wrapping [ErrNotReplicated]. It is transient and ambiguous: the
// write is on the primary, and a failover may keep it or lose it; an
// acquisition that fails so is undone in the background like any
// ambiguous one, so a caller that sees the error holds nothing. A server
// without replicas (or miniredis, whose WAIT answers 0) fails every
// operation so: use the option only with replicas. The background
// cleanups that undo ambiguous operations and retry failed releases do not
// wait: they only remove what an operation may have left, and their loss
// in a failover delays the next holder until the lease's TTL, as without
// the option.
//
// WAIT makes a write durable on replicas, not consensus: a failover to a
// replica that had not acknowledged (with more replicas than required)
// can still lose it. replicas must be at least 1 and timeout at least 1 ms
// and below the client's ReadTimeout (5 s by default); the client must be
// a *redis.Client (standalone, or the Sentinel-backed client of
// redis.NewFailoverClient) or a *redis.ClusterClient. [New] returns an
// error naming the argument otherwise. The default is no waiting.
func WithReplicaAcks(replicas int, timeout time.Duration) Option {
	return func(c *config) error {
		c.ReplicaAcks, c.ReplicaAckTimeout, c.acks = replicas, timeout, true
		return nil
	}
}

// New returns a coordinator over client: any go-redis universal client
// (*redis.Client, *redis.ClusterClient, the Sentinel-backed client of
// redis.NewFailoverClient). It sends nothing to Redis.
//
// Give the client ContextTimeoutEnabled: true (in redis.Options,
// redis.ClusterOptions, redis.FailoverOptions, redis.RingOptions or
// redis.UniversalOptions): without it go-redis does not bound a command's
// network I/O by the context's deadline, so a call waits out the client's
// read timeout and retries (seconds) on a server that stopped answering,
// whatever its context says. When the client's options have it off (a
// *redis.Client, *redis.ClusterClient or *redis.Ring; other clients
// cannot be asked), New logs one warning naming the option, through the
// [WithLogger] logger or, without one, slog.Default(); the warning names
// no address, user or password.
//
// It returns an error wrapping [ErrInvalidArgument] when client is nil or
// an option is invalid.
func New(client redis.UniversalClient, opts ...Option) (*Coordinator, error) {
	if isNil(client) {
		return nil, check.InvalidArgument("client", "must not be nil")
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
	if cfg.acks {
		if err := checkReplicaAcks(client, cfg.ReplicaAcks, cfg.ReplicaAckTimeout); err != nil {
			return nil, err
		}
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if deadlinesIgnored(client) {
		l := cfg.Logger
		if l == nil {
			l = slog.Default()
		}
		l.LogAttrs(context.Background(), slog.LevelWarn, deadlineWarning, slog.String("option", "ContextTimeoutEnabled"))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{e: engine.New(client, cfg.Config)}, nil
}

// deadlineWarning is the message New logs for a client that ignores context
// deadlines.
const deadlineWarning = "coordination: the go-redis client does not honour context deadlines " +
	"(ContextTimeoutEnabled is off): a call may outlive its context's deadline by the read timeout and retries; " +
	"set ContextTimeoutEnabled: true in the client's options"

// deadlinesIgnored reports whether client is a go-redis client whose
// options leave ContextTimeoutEnabled off. The Sentinel-backed client of
// redis.NewFailoverClient is a *redis.Client, and redis.NewUniversalClient
// returns one of the three; another implementation of the interface
// cannot be asked, and is not warned about.
func deadlinesIgnored(client redis.UniversalClient) bool {
	switch v := client.(type) {
	case *redis.Client:
		return !v.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return !v.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return !v.Options().ContextTimeoutEnabled
	}
	return false
}

func isNil(c redis.UniversalClient) bool {
	switch v := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return v == nil
	case *redis.ClusterClient:
		return v == nil
	case *redis.Ring:
		return v == nil
	}
	return false
}

// Client returns the go-redis client the coordinator was created with
// (nil for a nil or zero Coordinator, which no primitive accepts).
func (c *Coordinator) Client() redis.UniversalClient {
	if c == nil || c.e == nil {
		return nil
	}
	return c.e.Client()
}

// Shutdown ends the coordinator: every primitive created over it stops
// working, its background work ends, and no goroutine of it is left when
// Shutdown returns. Call it once the application no longer needs the
// coordinator, before closing the client (Shutdown never closes it):
//
//   - Every later operation of every primitive created over the
//     coordinator (locks, semaphores, latches, leader electors, Redlock
//     groups with it as a node, rate limiters ...) fails with an error
//     wrapping [ErrClosed] and sends nothing to Redis.
//   - Every blocked call (a lock.Mutex's Acquire, a semaphore's Acquire, a latch's
//     Wait, a leader campaign, a rate limiter's queued Wait, a Redlock
//     Acquire ...) returns promptly with an error wrapping ErrClosed (a
//     call whose command is in flight returns when its reply comes); a
//     leader elector's Run returns such an error once its callbacks have
//     returned. An acquisition whose command was in flight returns that
//     error even when the reply grants it: no handle is handed out after
//     Shutdown began, and the grant is released by that call before it
//     returns (at most a second), else it ends at its TTL. (A Redlock
//     group's round in flight is the exception: a quorum granted then is
//     returned as a lock whose handle has already ended, and its nodes'
//     keys end at their TTL.)
//   - Leases still held are not released: their keep-alives stop and each
//     lease ends on the server at its TTL (a waiter elsewhere gets it
//     then). Their handles end locally: the handle's Context is cancelled
//     with a cause matching both [ErrClosed] and [ErrLost], Remaining
//     returns 0, and Release, Refresh and Verify fail with an error
//     wrapping ErrClosed. Release what should be freed at once before
//     calling Shutdown.
//   - Each background cleanup still running (the owner-checked undo of an
//     ambiguous acquisition, the retry of a failed release) tries again
//     at once and goes on retrying until it succeeds, fails terminally, or
//     ctx ends; then it is abandoned and logged through the coordinator's
//     logger ([WithLogger]) like any abandoned cleanup: what it would have
//     removed ends at its TTL.
//   - The shared Pub/Sub connection is closed.
//
// Shutdown returns nil, or, when ctx ended before the cleanups
// succeeded, an error wrapping ctx's error that says how many were
// abandoned. It waits for the cleanup tries in flight to return even then:
// a try's context is cancelled, but a go-redis call blocked on an
// unresponsive server returns only by the client's read and write
// timeouts (with ContextTimeoutEnabled, by the try's own deadline, at most
// 5 s), so Shutdown can outlast ctx by up to that long. Without a deadline on ctx, Shutdown waits
// as long as a cleanup may retry (a minute at most).
//
// Shutdown is safe for concurrent use and idempotent: a later call
// returns the first call's result once that call has returned (or ctx's
// error, if ctx ends first). It returns an error wrapping
// [ErrInvalidArgument] for a nil ctx or a nil coordinator.
func (c *Coordinator) Shutdown(ctx context.Context) error {
	if c == nil || c.e == nil {
		return check.InvalidArgument("coord", "must not be nil or a zero Coordinator; use coordination.New")
	}
	return c.e.Shutdown(ctx)
}

// checkReplicaAcks validates the replica acknowledgement setting for
// client: at least one replica, a timeout of at least 1 ms that is below
// the client's read timeout (go-redis reads the pipelined WAIT reply within
// ReadTimeout), and a client whose commands for one key go to one
// connection of one server: a *redis.Client (standalone, or the
// Sentinel-backed client of redis.NewFailoverClient) or a
// *redis.ClusterClient. Errors wrap [ErrInvalidArgument] and name the
// argument.
func checkReplicaAcks(client redis.UniversalClient, replicas int, timeout time.Duration) error {
	if replicas < 1 {
		return check.InvalidArgument("replicas", "must be at least 1, got %d", replicas)
	}
	if _, err := check.Millis("timeout", timeout); err != nil {
		return err
	}
	var read time.Duration
	switch c := client.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return check.InvalidArgument("client", "replica acknowledgements need a *redis.Client or *redis.ClusterClient, got %T", client)
	}
	// Options() holds the initialised timeout: positive, or 0 or -1 for
	// none.
	if read > 0 && timeout >= read {
		return check.InvalidArgument("timeout", "must be below the client's ReadTimeout (%v), got %v", read, timeout)
	}
	return nil
}
