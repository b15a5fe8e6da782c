package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

const primitive = "idempotency"

// State is what [Store.Begin] found at a key.
type State int

const (
	// Started means the caller now owns a new pending claim: run the work,
	// then call [Store.Complete] (or [Store.Abandon]) with [Claim.Owner].
	Started State = iota + 1
	// Completed means an earlier caller finished the work: [Claim.Result]
	// holds the result it stored.
	Completed
	// InProgress means another caller owns a pending claim on the key and
	// has neither completed nor abandoned it yet. [Claim.Remaining] says how
	// long the claim lasts at most.
	InProgress
	// FingerprintMismatch means the key is claimed (pending, completed or
	// failed) by a request with a different fingerprint. Nothing about that
	// claim is revealed.
	FingerprintMismatch
	// Failed means an earlier caller's work on the key failed in a way
	// that was not safe to retry ([Store.Fail], or [Store.Do] when fn
	// returned an error not marked [RetrySafe]): it may or may not have had
	// its effects, so the library will not run it again on its own.
	// [Claim.Remaining] says how long the key stays failed; after that
	// the next Begin starts a new claim. To retry sooner, once the outcome
	// has been checked, delete the record with [Store.Forget].
	Failed
)

// String returns "started", "completed", "in progress", "fingerprint
// mismatch" or "failed".
func (s State) String() string {
	switch s {
	case Started:
		return "started"
	case Completed:
		return "completed"
	case InProgress:
		return "in progress"
	case FingerprintMismatch:
		return "fingerprint mismatch"
	case Failed:
		return "failed"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Attribute sets of the package's instruments, built once.
var (
	beginAttrs = map[State]metric.MeasurementOption{
		Started:             instrument.Attrs(attribute.String("state", "started")),
		Completed:           instrument.Attrs(attribute.String("state", "completed")),
		InProgress:          instrument.Attrs(attribute.String("state", "in_progress")),
		FingerprintMismatch: instrument.Attrs(attribute.String("state", "fingerprint_mismatch")),
		Failed:              instrument.Attrs(attribute.String("state", "failed")),
	}
	completeStored   = instrument.Attrs(attribute.String("result", "stored"))
	completeNotOwner = instrument.Attrs(attribute.String("result", "not_owner"))
	abandonAbandoned = instrument.Attrs(attribute.String("result", "abandoned"))
	abandonNotOwner  = instrument.Attrs(attribute.String("result", "not_owner"))
	failFailed       = instrument.Attrs(attribute.String("result", "failed"))
	failNotOwner     = instrument.Attrs(attribute.String("result", "not_owner"))
)

// beginOpts are beginAttrs as option lists, built once: a fresh variadic
// list would allocate on every Begin.
var beginOpts = func() map[State][]metric.AddOption {
	m := make(map[State][]metric.AddOption, len(beginAttrs))
	for st, a := range beginAttrs {
		m[st] = []metric.AddOption{a}
	}
	return m
}()

// Claim is the answer of [Store.Begin]. Only the fields of its State are
// set; the others are zero.
type Claim struct {
	// State says what Begin found.
	State State
	// Owner is the owner token of a Started claim (22 characters, random):
	// pass it to [Store.Complete] or [Store.Abandon]. Keep it private; it is
	// what lets a caller finish the claim. Empty for every other state.
	Owner string
	// Result is the stored result of a Completed claim, exactly the bytes
	// given to [Store.Complete] (non-nil, possibly empty). It is the
	// caller's own copy. Nil for every other state.
	Result []byte
	// Remaining is, for InProgress, the pending claim's remaining TTL as the
	// server reported it: the longest the key can stay in progress before
	// another caller may take it over; for Failed, how long the key stays
	// failed (the failed claim's remaining TTL) before a Begin can start a
	// new claim. Zero for every other state.
	Remaining time.Duration
	// Fence is the fencing token of a Started claim: a positive integer
	// strictly greater than the token of every earlier claim lifetime on
	// the key (the server's clock in microseconds at the claim's creation,
	// or one more than an abandoned claim's token), so a caller whose claim
	// expired and was taken over carries a smaller token than its successor.
	// Pass it to every write the work makes to a resource that checks
	// tokens (such as fencing.Guarded.Set): the late writes of a taken-over
	// original are then refused. A re-sent Begin reports the same token.
	// Monotonic as long as the server's clock does not step back by more
	// than a claim's lifetime. Zero for every other state.
	Fence int64

	sent time.Time // Started: the instant before Begin's last attempt was sent
}

// claimOf turns the begin script's decoded reply into a Claim; token is
// the owner token the call sent.
func claimOf(r beginReply, token string, sent time.Time) (Claim, error) {
	switch r.State {
	case Started:
		if r.Owner != token {
			// The script answers Started only with the caller's own claim.
			return Claim{}, decode.Unexpected(beginScript.Name(), r.Owner)
		}
		return Claim{State: Started, Owner: token, Fence: r.Fence, sent: sent}, nil
	case Completed:
		return Claim{State: Completed, Result: []byte(r.Result)}, nil
	case InProgress:
		return Claim{State: InProgress, Remaining: r.Remaining}, nil
	case FingerprintMismatch:
		return Claim{State: FingerprintMismatch}, nil
	case Failed:
		return Claim{State: Failed, Remaining: r.Remaining}, nil
	}
	return Claim{}, decode.Unexpected(beginScript.Name(), nil)
}

// Store records idempotency claims and their results in Redis: one string
// per key, created by [Store.Begin], finished by [Store.Complete] or
// [Store.Abandon]. Each of these is one Lua script, one round trip, on one
// key, so a Store works unchanged on Redis Cluster. The layout is described
// in the package documentation.
//
// A Store holds no state of its own besides its coordinator. It is safe for
// concurrent use by multiple goroutines. The zero value is not usable; use
// [New].
type Store struct {
	e *engine.Engine
}

// New returns a store whose keys live under coord's key prefix. It sends
// nothing to Redis.
//
// It returns an error wrapping coordination.ErrInvalidArgument naming
// "coord" when coord is nil.
func New(coord *coordination.Coordinator) (*Store, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	return &Store{e: e}, nil
}

// engine returns the store's engine, or an error naming "store" when s is
// nil or the zero value.
func (s *Store) engine() (*engine.Engine, error) {
	if s == nil || s.e == nil {
		return nil, check.InvalidArgument("store", "must not be nil; use idempotency.New")
	}
	return s.e, nil
}

// checkKey validates the store and key of the operation op (a hooks
// operation name), returning the engine and the key's Keys; its errors
// name op, as every error of op does (nothing admitted).
func (s *Store) checkKey(op, key string) (*engine.Engine, engine.Keys, error) {
	e, err := s.engine()
	if err != nil {
		return nil, engine.Keys{}, engine.OpError(op, engine.Keys{}, err)
	}
	if err := check.Key("key", key); err != nil {
		return nil, engine.Keys{}, engine.OpError(op, engine.Keys{}, err)
	}
	return e, e.Key(key), nil
}

// checkOwned validates the arguments of Complete, Abandon and KeepAlive
// (op names the operation in its errors, with the key).
func (s *Store) checkOwned(op, key, owner string) (*engine.Engine, engine.Keys, error) {
	e, k, err := s.checkKey(op, key)
	if err != nil {
		return nil, k, err
	}
	if owner == "" {
		return nil, k, engine.OpError(op, k, check.InvalidArgument("owner", "must not be empty; use the Owner of a Started claim"))
	}
	if err := check.Size("owner", len(owner), check.MaxIdentityBytes); err != nil {
		return nil, k, engine.OpError(op, k, err)
	}
	return e, k, nil
}

// BeginOption configures one [Store.Begin] (or [Store.Do]) call. An
// invalid option makes the call fail with an error wrapping
// coordination.ErrInvalidArgument naming the setting, before anything is
// sent.
type BeginOption func(*beginConfig) error

type beginConfig struct {
	fingerprint *string
	resultMs    int64 // 0: the ttl given to Begin
	wait        time.Duration
	noKeepAlive bool // Do only
}

// WithFingerprint records fp, a digest of the request the key stands for,
// with a new claim, and compares it with the fingerprint of an existing
// claim: a different one answers [FingerprintMismatch]. fp may hold any
// bytes. Giving no fingerprint is not the same as giving an empty one: a
// claim made without a fingerprint does not match a request with one (even
// an empty one), and the other way round. Give the same fingerprint on every
// attempt of a request, retries included. The default is no fingerprint.
func WithFingerprint(fp string) BeginOption {
	return func(c *beginConfig) error {
		if err := check.Size("fingerprint", len(fp), check.MaxFingerprintBytes); err != nil {
			return err
		}
		c.fingerprint = &fp
		return nil
	}
}

// WithResultTTL sets how long a completed result is kept: [Store.Complete]
// restarts the key's TTL with d (rounded up to whole milliseconds; at least
// 1 ms, or the call fails naming "resultTTL"). It is recorded with a new
// claim only; a Begin that finds an existing claim never changes it. The
// default is the ttl given to Begin, which then bounds both the pending
// claim and the stored result.
func WithResultTTL(d time.Duration) BeginOption {
	return func(c *beginConfig) error {
		ms, err := check.Millis("resultTTL", d)
		if err != nil {
			return err
		}
		c.resultMs = ms
		return nil
	}
}

// WithWait makes Begin wait, up to d, when it finds the key in progress:
// it returns as soon as the claim is completed (answering Completed),
// abandoned or expired (then the caller takes the key over: Started), or
// when d has passed (InProgress). It does not poll: it wakes on the
// notification that Complete and Abandon publish and at the claim's
// server-reported expiry, re-checking at least every 5 s in case a
// notification was lost (every 250 ms while the server has not confirmed
// the subscription, e.g. under an ACL without the coordination:* channels).
// Transient errors while waiting are retried with backoff. The default is
// 0: answer InProgress at once. Negative values make the call fail naming
// "wait".
func WithWait(d time.Duration) BeginOption {
	return check.AtLeast("wait", d, 0, func(c *beginConfig) { c.wait = d })
}

// errWaitOver is the cause of the context that bounds a WithWait wait.
var errWaitOver = errors.New("idempotency: wait bound reached")

// Begin claims key for the caller, or reports what holds it, in one round
// trip (one script; admitted once as IDEMPOTENCY BEGIN, however long it
// waits):
//
//   - no claim (never claimed, expired, or abandoned): a new pending claim
//     owned by a fresh random token is created with TTL ttl; the answer is
//     Started with that token in [Claim.Owner];
//   - a claim with a different fingerprint (see [WithFingerprint]):
//     FingerprintMismatch;
//   - a completed claim: Completed with the stored result;
//   - a pending claim of another caller: InProgress (see [WithWait]).
//
// Every state is an answer, returned with a nil error (hooks learn the
// operation as succeeded). A Begin that finds an existing claim never
// changes it: not its TTL, not its result TTL, not its fingerprint. ttl is
// rounded up to whole milliseconds and must be at least 1 ms. Choose it
// longer than the work takes: when a pending claim expires (its owner
// crashed, or is slow), the next Begin takes the key over with a new
// token, and the old owner's Complete and Abandon then return false.
//
// Errors: coordination.ErrInvalidArgument naming store, coord, key, ttl,
// resultTTL or wait, with nothing sent; an error matching
// coordination.ErrBadState (with ErrBadState) when key holds another Redis
// type (a claim of an earlier version, a hash, included), or
// coordination.ErrBadState when the string is not a claim this package wrote (or the reply is not one the client knows), both detected
// before anything is written; the hook's error when a hook rejects; Redis
// and network errors as go-redis returns them (NOPERM when the ACL denies
// EVALSHA, the key or a command the script runs, NOAUTH or WRONGPASS when
// the client is not authenticated: all terminal); while waiting ([WithWait]), an error matching both
// coordination.ErrNotAcquired and ctx's cause when ctx ends first; ctx's
// error otherwise. When any attempt's outcome is ambiguous (the reply was
// lost: a timeout, a cancelled ctx, a broken connection, even if a later
// attempt of the same call got an answer other than Started) a claim may
// have been created that the caller never learnt about; a background
// owner-checked Abandon with the same token removes it, so a retry is not
// blocked until the claim's TTL (see the package documentation for
// re-sends).
func (s *Store) Begin(ctx context.Context, key string, ttl time.Duration, opts ...BeginOption) (Claim, error) {
	e, k, err := s.checkKey(hooks.IdempotencyBegin, key)
	if err != nil {
		return Claim{}, err
	}
	ttlMs, err := check.Millis("ttl", ttl)
	if err != nil {
		return Claim{}, engine.OpError(hooks.IdempotencyBegin, k, err)
	}
	var cfg beginConfig
	if len(opts) > 0 {
		c := new(beginConfig) // options see a pointer: only then on the heap
		if err := check.Apply(c, opts); err != nil {
			return Claim{}, engine.OpError(hooks.IdempotencyBegin, k, err)
		}
		cfg = *c
	}
	if cfg.resultMs == 0 {
		cfg.resultMs = ttlMs
	}
	token, err := engine.NewToken()
	if err != nil {
		return Claim{}, err
	}
	ctx, op, err := e.Admit(ctx, hooks.IdempotencyBegin, primitive, k)
	if err != nil {
		return Claim{}, err
	}
	// The script's arguments: the pending TTL, the end of a new claim and,
	// when the result TTL differs, its start (see idempotency_begin.lua).
	args := make([]any, 2, 3)
	args[0], args[1] = ttlMs, ":"+token+":"+fingerprintPart(cfg.fingerprint)
	if cfg.resultMs != ttlMs {
		args = append(args, claimHead(cfg.resultMs))
	}
	claim, err := begin(ctx, e, k, token, ttl, cfg.wait, args)
	if err != nil {
		return Claim{}, op.End(err)
	}
	e.Add(beginsMetric, 1, beginOpts[claim.State]...)
	return claim, op.End(nil)
}

// claimHead returns the start of a new pending claim as stored: "P", the
// result TTL in milliseconds and ":" (the script adds the fence, the owner
// and the fingerprint part).
func claimHead(resultMs int64) string {
	var b [24]byte
	return string(append(strconv.AppendInt(append(b[:0], 'P'), resultMs, 10), ':'))
}

// fingerprintPart returns the fingerprint part of a claim as stored
// (layout in the package documentation): '-:' without a fingerprint, its
// length, ':' and its bytes otherwise.
func fingerprintPart(fingerprint *string) string {
	if fingerprint == nil {
		return "-:"
	}
	var digits [20]byte
	return string(strconv.AppendInt(digits[:0], int64(len(*fingerprint)), 10)) + ":" + *fingerprint
}

// begin runs the begin script (once, or until the claim is no longer in
// progress or wait has passed) and cleans up after an ambiguous attempt.
func begin(ctx context.Context, e *engine.Engine, k engine.Keys, token string, ttl, wait time.Duration, args []any) (Claim, error) {
	ambiguous := false // sticky: some attempt of this call may have run unseen
	try := func(ctx context.Context) (Claim, error) {
		if err := ctx.Err(); err != nil {
			return Claim{}, err // ended before the attempt: nothing sent
		}
		sent := time.Now()
		r, err := beginScript.Run(ctx, e, k, args...)
		if err != nil {
			ambiguous = ambiguous || e.Ambiguous(err)
			return Claim{}, err
		}
		return claimOf(r, token, sent)
	}
	claim, err := try(ctx)
	if err == nil && claim.State == InProgress && wait > 0 {
		claim, err = waitFor(ctx, e, k, wait, claim, try)
	}
	if ambiguous && (err != nil || claim.State != Started) {
		// An attempt whose reply was lost may have created a claim owned by
		// token that nobody will finish: remove it, owner-checked. (When the
		// answer is Started, a later attempt found that claim: it is the
		// caller's.)
		// The owner token is this abandon's id too, and the abandoned
		// claim a tombstone that the attempt's request, if it reaches the
		// server after this cleanup, cannot pass (idempotency_begin
		// refuses an abandon id equal to its owner token).
		life := engine.AbandonFor(ttl).Milliseconds()
		e.Cleanup("begin", ttl, func(ctx context.Context) error {
			_, err := abandonScript.Run(ctx, e, k, token, token, life)
			return err
		})
	}
	return claim, err
}

// waitFor retries try (same owner token, so a re-run never creates a
// second claim) through the engine's wait loop, on every completion or
// abandonment notification for k and at the claim's expiry, until the
// answer is not InProgress or d has passed. first is the InProgress answer
// already received. When d passes it returns the last answer received, or
// the last error if the last attempt failed for another reason than the
// bound; when ctx ends first, the wait loop's give-up error.
func waitFor(ctx context.Context, e *engine.Engine, k engine.Keys, d time.Duration, first Claim,
	try func(context.Context) (Claim, error)) (Claim, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, d, errWaitOver)
	defer cancel()
	last, known := first, true
	var lastErr error
	retryIn := func(c Claim) time.Duration { return c.Remaining + time.Millisecond }
	err := e.Wait(wctx, engine.WaitConfig{Key: k.Full()[0]}, func(ctx context.Context) (engine.Attempt, error) {
		if known {
			// The first answer is already known: go straight to subscribing
			// (the loop then tries again at once).
			known = false
			return engine.Attempt{RetryIn: retryIn(first)}, nil
		}
		c, err := try(ctx)
		if err != nil {
			lastErr = err
			return engine.Attempt{}, err
		}
		last, lastErr = c, nil
		return engine.Attempt{Done: c.State != InProgress, RetryIn: retryIn(c)}, nil
	})
	switch {
	case err == nil:
		return last, nil
	case ctx.Err() != nil:
		return Claim{}, err
	case errors.Is(context.Cause(wctx), errWaitOver):
		// Our own bound ran out. An attempt it interrupted does not count.
		if lastErr != nil && engine.Classify(lastErr) != engine.Canceled {
			return Claim{}, lastErr
		}
		return last, nil
	default:
		return Claim{}, err
	}
}

// Complete stores result as the outcome of the pending claim on key owned
// by owner (the token of a Started [Claim]), restarts the key's TTL with
// the claim's result TTL (see [WithResultTTL]; by default the ttl given to
// Begin), and wakes callers waiting in Begin ([WithWait]). One round trip,
// admitted as IDEMPOTENCY COMPLETE. result may hold any bytes and may be
// empty or nil (stored as empty); Complete copies nothing it keeps.
//
// It reports whether this call stored the result. It returns false, and
// changes nothing, when the claim is no longer the caller's: it expired
// or was deleted with [Store.Forget] (and may have been taken over by
// another caller, whose claim is left alone; the answer does not tell
// which), was abandoned, or was already completed by an earlier Complete
// (whose result is kept). A false answer after the work ran means the work
// may run again elsewhere.
//
// Errors: coordination.ErrInvalidArgument naming store, key or owner
// (empty), with nothing sent; coordination.ErrBadState when the key holds
// something this package did not write (nothing is written); the hook's error; Redis (NOPERM, NOAUTH
// ...), network and ctx errors. After an ambiguous error the result may or
// may not be stored: [Store.Begin] with the same fingerprint tells
// (Completed, or InProgress while the claim is still pending). Calling
// Complete again then returns false in both cases, because each call
// carries its own completion id.
func (s *Store) Complete(ctx context.Context, key, owner string, result []byte) (bool, error) {
	e, k, err := s.checkOwned(hooks.IdempotencyComplete, key, owner)
	if err != nil {
		return false, err
	}
	if err := check.Size("result", len(result), check.MaxValueBytes); err != nil {
		return false, engine.OpError(hooks.IdempotencyComplete, k, err)
	}
	id, err := engine.NewToken()
	if err != nil {
		return false, err
	}
	ctx, op, err := e.Admit(ctx, hooks.IdempotencyComplete, primitive, k)
	if err != nil {
		return false, err
	}
	if result == nil {
		result = []byte{}
	}
	ok, err := completeScript.Run(ctx, e, k, owner, result, id)
	if err != nil {
		return false, op.End(err)
	}
	if ok {
		e.Count(completesMetric, completeStored)
	} else {
		e.Count(completesMetric, completeNotOwner)
	}
	return ok, op.End(nil)
}

// Forget deletes key's idempotency record whatever it holds (a pending
// claim, a completed result, an abandoned claim's mark, a failed claim), so that the next
// [Store.Begin] or [Store.Do] on key starts afresh, and wakes callers
// waiting in Begin. One round trip, admitted as IDEMPOTENCY FORGET. It is
// the way out for an operator or an application: a stored result that
// must not be replayed any more, a [Failed] claim once the outcome of its
// work has been checked (and undone or found absent), a claim left pending
// by a process that died. It breaks the at-most-once guarantee for that
// key on purpose: work of a pending claim may still be running, and the
// next Begin starts it again. (For the middleware's records, key is
// [StoreKey] of the namespace and the request's Idempotency-Key.)
//
// It reports whether a record was deleted (false: there was none).
// Errors: coordination.ErrInvalidArgument naming "key" (nothing sent);
// coordination.ErrBadState when key holds something that is not an
// idempotency record (nothing is deleted); the hook's error; Redis and
// network errors (calling Forget again settles an ambiguous one).
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	e, k, err := s.checkKey(hooks.IdempotencyForget, key)
	if err != nil {
		return false, err
	}
	ctx, op, err := e.Admit(ctx, hooks.IdempotencyForget, primitive, k)
	if err != nil {
		return false, err
	}
	ok, err := forgetScript.Run(ctx, e, k)
	return ok, op.End(err)
}

// Abandon deletes the pending claim on key if owner (the token of a Started
// [Claim]) still owns it, so that the next Begin starts afresh, and wakes
// callers waiting in Begin. One round trip, admitted as IDEMPOTENCY
// ABANDON. Use it when the work failed in a way that is safe to run again
// (nothing happened yet, or the failure was rolled back). Do not abandon
// after a failure that may have left side effects: use [Store.Fail]
// instead, or complete the claim with a result that describes the failure.
//
// It reports whether this call deleted the claim. It returns false, and
// changes nothing, when there is no claim (it expired or was abandoned
// before), when another caller owns it (the caller's expired and was taken
// over), or when it is completed or failed: a stored result or a failure
// is never removed by Abandon.
//
// Errors: those of [Store.Complete]. An ambiguous error is settled by
// calling Abandon again: afterwards no pending claim of owner remains,
// whatever the first call did (the second then reports false if the first
// deleted the claim).
func (s *Store) Abandon(ctx context.Context, key, owner string) (bool, error) {
	return s.end(ctx, hooks.IdempotencyAbandon, abandonScript, key, owner, abandonsMetric, abandonAbandoned, abandonNotOwner)
}

// end runs script (abandon or fail: KEYS claim key, ARGV owner and a fresh
// call id) as the admitted operation op, counting its answer in m.
func (s *Store) end(ctx context.Context, op string, script *engine.Script[bool], key, owner string,
	m *instrument.Metric, done, notOwner metric.MeasurementOption) (bool, error) {
	e, k, err := s.checkOwned(op, key, owner)
	if err != nil {
		return false, err
	}
	ctx, adm, err := e.Admit(ctx, op, primitive, k)
	if err != nil {
		return false, err
	}
	id, err := engine.NewToken()
	if err != nil {
		return false, adm.End(err)
	}
	ok, err := script.Run(ctx, e, k, owner, id)
	if err != nil {
		return false, adm.End(err)
	}
	if ok {
		e.Count(m, done)
	} else {
		e.Count(m, notOwner)
	}
	return ok, adm.End(nil)
}

// Fail records that the work of the pending claim on key owned by owner
// (the token of a Started [Claim]) failed in a way that is not safe to run
// again: it may or may not have had its effects. The claim becomes
// [Failed] for the rest of its TTL (the pending claim's remaining TTL is
// kept: at most the ttl given to Begin, or the last keep-alive's), and
// callers waiting in Begin are woken. Until then every Begin with the same
// fingerprint answers Failed at once, with [Claim.Remaining], instead of
// InProgress for a claim nobody will finish; [Store.Do] returns
// [ErrOutcomeUnknown]. Afterwards the next Begin starts a new claim (with a
// larger fencing token). To let a retry run sooner, check the outcome and
// then call [Store.Forget]. One round trip, admitted as IDEMPOTENCY FAIL.
//
// It reports whether this call recorded the failure. It returns false, and
// changes nothing, when the claim is no longer the caller's: it expired
// (and may have been taken over), was abandoned, completed, or failed by
// another call.
//
// Errors: those of [Store.Complete]. An ambiguous error is settled by
// [Store.Begin] with the same fingerprint (Failed, or InProgress while the
// claim is still pending: calling Fail again then records it).
func (s *Store) Fail(ctx context.Context, key, owner string) (bool, error) {
	return s.end(ctx, hooks.IdempotencyFail, failScript, key, owner, failsMetric, failFailed, failNotOwner)
}
