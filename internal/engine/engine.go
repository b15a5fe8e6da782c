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
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
)

// Engine is the shared state behind one coordinator: a go-redis client, a
// key prefix, hooks, instruments, a logger, the notification hub and the
// background cleanups. It is safe for concurrent use.
type Engine struct {
	client  redis.UniversalClient
	prefix  string
	hooks   hooks.Chain
	resends bool // the client may re-send a command after a lost reply
	retry   retryPolicy
	acks    replicaAcks
	logger  *slog.Logger
	meter   metric.Meter
	tracing tracing

	duration *durationRecorder
	inst     instruments
	hub      *hub
	cleanup  cleanups
	local    sync.Map // see Local
	life     lifecycle
	dials    struct { // see WatchDials
		once sync.Once
		w    atomic.Pointer[dialWatch]
	}
}

// Config is what [New] needs besides the client.
type Config struct {
	Prefix        string
	Hooks         []hooks.Hook
	MeterProvider metric.MeterProvider
	// TracerProvider starts every admitted operation's span; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	// ReplicaAcks, when above 0, makes every script call wait (WAIT in the
	// same pipeline) until that many replicas acknowledged its writes, for
	// at most ReplicaAckTimeout; the root package validates it.
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
		retry:   clientRetry(client),
		logger:  cfg.Logger,
		meter:   cfg.MeterProvider.Meter(instrument.Scope),
		acks:    replicaAcks{n: cfg.ReplicaAcks, timeout: cfg.ReplicaAckTimeout},
	}
	e.duration = newDurationRecorder(e.meter)
	e.inst.init(e.meter)
	e.tracing.init(cfg.TracerProvider)
	e.hub = newHub(e)
	e.life.init()
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

// Install is called once by package coordination, at initialisation, with
// the function [Of] uses to reach the engine of a coordinator and the one
// [InitLease] uses to fill a *coordination.Lease.
func Install(unwrapFn func(any) *Engine, leaseInitFn func(dst any, key, token string, h *Handle)) {
	unwrapMu.Lock()
	unwrap, leaseInit = unwrapFn, leaseInitFn
	unwrapMu.Unlock()
}

// Of returns the engine of coord (a *coordination.Coordinator), or an error
// wrapping [sentinel.ErrInvalidArgument] naming "coord" when coord is nil.
func Of(coord any) (*Engine, error) {
	unwrapMu.RLock()
	f := unwrap
	unwrapMu.RUnlock()
	if f != nil {
		if e := f(coord); e != nil {
			return e, nil
		}
	}
	return nil, check.InvalidArgument("coord", "must not be nil or a zero Coordinator; use coordination.New")
}

// Client returns the go-redis client.
func (e *Engine) Client() redis.UniversalClient { return e.client }

// Prefix returns the key prefix.
func (e *Engine) Prefix() string { return e.prefix }

// Logger returns the logger (never nil).
func (e *Engine) Logger() *slog.Logger { return e.logger }

// Ambiguous reports whether an operation that ended with err may have
// written on the server: [IsAmbiguous] (false for a failed dial or a pool
// timeout, [isUnsent]), except that when the client never re-sends
// (MaxRetries -1) an error reply also proves the one attempt did not run.
func (e *Engine) Ambiguous(err error) bool {
	if !IsAmbiguous(err) {
		return false
	}
	return e.resends || !neverSent(err)
}

// Keys are a primitive's keys with the prefix applied and their Cluster
// slot checked, built once per operation (or per handle) by [Engine.NamedKeys]
// or [Engine.Key]. The zero value has no keys.
type Keys struct {
	full []string
	// boxed holds the same keys as command arguments, converted to
	// interfaces once for every command that uses them.
	boxed []any
	// one and oneArg hold the single key of [Engine.Key] (full is nil
	// then): two allocations per key instead of four.
	one    string
	oneArg any
	// name is the first key as the caller gave it (without the prefix),
	// for error messages ([Op.End]); named says it is set.
	name  string
	named bool
	field string // a part of the first key the errors name too; see Field
}

// Field returns k naming field, a part of its first key (a hash field
// holding one lease of many), in its errors after the key:
// `OPERATION "KEY" field "FIELD": CAUSE`.
func (k Keys) Field(field string) Keys { k.field = field; return k }

// Name returns the first key as the caller gave it, without the prefix,
// and false for keys built without one.

func (k Keys) single() bool { return k.full == nil && k.oneArg != nil }

// Len returns the number of keys.
func (k Keys) size() int {
	if k.single() {
		return 1
	}
	return len(k.full)
}

// Full returns the prefixed keys. The slice must not be modified.
func (k Keys) Full() []string {
	if k.single() {
		return []string{k.one}
	}
	return k.full
}

// firstKey returns the first prefixed key.
func (k Keys) firstKey() string {
	if k.single() {
		return k.one
	}
	return k.full[0]
}

// First returns the first key alone.
func (k Keys) First() Keys { return k.head(1) }

// head returns the first n keys (all of them when n is 0 or more than
// there are).
func (k Keys) head(n int) Keys {
	if n <= 0 || n >= k.size() {
		return k
	}
	h := Keys{full: k.full[:n:n], name: k.name, named: k.named, field: k.field}
	if len(k.boxed) == len(k.full) {
		h.boxed = k.boxed[:n:n]
	}
	return h
}

// arg returns the i-th key as a command argument.
func (k Keys) arg(i int) any {
	switch {
	case k.single():
		return k.oneArg
	case len(k.boxed) == len(k.full):
		return k.boxed[i]
	}
	return k.full[i]
}

// put writes the keys as command arguments into dst.
func (k Keys) put(dst []any) {
	switch {
	case k.single():
		dst[0] = k.oneArg
	case len(k.boxed) == len(k.full):
		copy(dst, k.boxed)
	default:
		for i, s := range k.full {
			dst[i] = s
		}
	}
}

// Key applies the prefix to one key.
func (e *Engine) Key(key string) Keys {
	full := e.prefix + key
	return Keys{one: full, oneArg: full, name: key, named: true}
}

// NamedKeys applies the prefix to keys and, with more than one key, checks
// that they hash to one Cluster slot, returning an error wrapping
// [sentinel.ErrInvalidArgument] naming the slots (and sending nothing) when
// they do not. names[i] is keys[i]'s argument name (e.g. "leaseKey",
// "fenceKey"), which that error names; nil names them "key 1", "key 2".
func (e *Engine) NamedKeys(names []string, keys ...string) (Keys, error) {
	full := make([]string, len(keys))
	boxed := make([]any, len(keys))
	for i, k := range keys {
		full[i] = e.prefix + k
		boxed[i] = full[i]
	}
	if err := sameSlot(names, full); err != nil {
		return Keys{}, err
	}
	k := Keys{full: full, boxed: boxed}
	if len(keys) > 0 {
		k.name, k.named = keys[0], true
	}
	return k, nil
}

// NewToken returns a fresh random owner token: a version 4 UUID (122
// random bits from crypto/rand) in 22 bytes of unpadded base64url, as
// bsm/redislock's tokens are: a held lock key is then as small as the
// peers' (MEMORY USAGE 120 B with a 40-byte key name, 136 B with the
// 36-byte UUID text).
func NewToken() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("coordination: owner token: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return base64.RawURLEncoding.EncodeToString(u[:]), nil
}

// Op is one admitted public operation. Its End must be called exactly once.
type Op struct {
	e         *Engine
	name      string
	primitive string
	start     time.Time
	done      hooks.Done
	keys      Keys       // names the key in End's error; see [Op.On]
	span      trace.Span // nil when not traced
	wait      *spanWait  // a recording span's wait time; nil otherwise
}

// On returns o naming the first of keys (as the caller gave it) in the
// error End returns, for an error that does not name one already.
func (o Op) On(keys Keys) Op {
	o.keys = keys
	return o
}

// Admit admits the operation name of primitive through the hooks, before
// any Redis work, and then starts its span (see [tracing.start]): the
// returned context carries it. On rejection it returns an error naming
// the operation and wrapping the hook's error (no span is started), and
// the caller must not touch Redis; after
// [Engine.Shutdown] it refuses every operation so, with an error wrapping
// [sentinel.ErrClosed] (no hook sees it); a nil ctx is refused first, with
// [check.NilContext] named the same way (nothing admitted). The first of
// keys, when given, is the key these errors name and the one [Op.End]
// names (as [Op.On] does).
func (e *Engine) Admit(ctx context.Context, name, primitive string, keys ...Keys) (context.Context, Op, error) {
	var k Keys
	if len(keys) > 0 {
		k = keys[0]
	}
	if ctx == nil {
		return ctx, Op{}, OpError(name, k, check.NilContext())
	}
	if e.life.closed.Load() {
		return ctx, Op{}, &opError{op: name, key: k.name, named: k.named, field: k.field, err: errShutdown}
	}
	op := Op{e: e, name: name, primitive: primitive, start: time.Now(), keys: k}
	if len(e.hooks) > 0 {
		next, done, err := e.hooks.Admit(ctx, hooks.Operation{Name: name, Primitive: primitive})
		if err != nil {
			return ctx, Op{}, &opError{op: name, key: k.name, named: k.named, field: k.field, err: fmt.Errorf("rejected by hook: %w", err)}
		}
		if next != nil {
			ctx = next
		}
		op.done = done
	}
	if e.tracing.on() {
		ctx, op.span, op.wait = e.tracing.start(ctx, name)
	}
	return ctx, op, nil
}

// End reports the operation's outcome ([outcomeOf] err) to the duration
// histogram, the span (ended before the hooks learn the outcome, so that a
// hook's own span ends after it) and the hooks, and returns err
// ([OpError]) naming the operation and the key: the key of the script or
// command run that failed, or else the one [Op.On] gave.
func (o Op) End(err error) error {
	if o.e == nil {
		return err
	}
	if err != nil {
		err = OpError(o.name, o.keys, err)
	}
	out := outcomeOf(err)
	o.e.duration.record(o.name, out, time.Since(o.start))
	if o.span != nil {
		o.endSpan(out, err)
	}
	if o.done != nil {
		o.done(out, err)
	}
	return err
}

// outcomeOf is the one place the library decides how an operation's error
// counts for hooks: nil and answers ([Answer], such as sentinel.ErrNotAcquired for a
// contended TryAcquire) are Succeeded; a blocking wait that gave up and
// context errors are Canceled; everything else is Failed.
func outcomeOf(err error) hooks.Outcome {
	switch {
	case err == nil:
		return hooks.Succeeded
	case Classify(err) == Canceled:
		return hooks.Canceled
	case sentinel.IsAnswer(err):
		return hooks.Succeeded
	default:
		return hooks.Failed
	}
}
