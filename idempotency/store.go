package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lease"
	"github.com/coordkit/coordination/internal/waitloop"
	"github.com/coordkit/coordination/lua"
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
	// FingerprintMismatch means the key is claimed (pending or completed)
	// by a request with a different fingerprint. Nothing about that claim
	// is revealed.
	FingerprintMismatch
)

// String returns "started", "completed", "in progress" or
// "fingerprint mismatch".
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
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// metricName is the value of the state attribute of
// coordination.idempotency.begins: String with underscores.
func (s State) metricName() string { return strings.ReplaceAll(s.String(), " ", "_") }

// Claim is the answer of [Store.Begin]. Only the fields of its State are
// set; the others are zero.
type Claim struct {
	// State says what Begin found.
	State State
	// Owner is the owner token of a Started claim (36 characters, random):
	// pass it to [Store.Complete] or [Store.Abandon]. Keep it private; it is
	// what lets a caller finish the claim. Empty for every other state.
	Owner string
	// Result is the stored result of a Completed claim, exactly the bytes
	// given to [Store.Complete] (non-nil, possibly empty). It is the
	// caller's own copy. Nil for every other state.
	Result []byte
	// Remaining is, for InProgress, the pending claim's remaining TTL as the
	// server reported it: the longest the key can stay in progress before
	// another caller may take it over. Zero for every other state.
	Remaining time.Duration
}

// Store records idempotency claims and their results in Redis: one hash per
// key, created by [Store.Begin], finished by [Store.Complete] or
// [Store.Abandon]. Each of these is one Lua script, one round trip, on one
// key, so a Store works unchanged on Redis Cluster.
//
// A Store holds no state of its own besides its coordinator. It is safe for
// concurrent use by multiple goroutines. The zero value is not usable; use
// [New].
type Store struct {
	coord *coordination.Coordinator
}

// New returns a store whose keys live under coord's key prefix. It sends
// nothing to Redis.
//
// It returns an error wrapping coordination.ErrInvalidArgument naming
// "coord" when coord is nil.
func New(coord *coordination.Coordinator) (*Store, error) {
	if err := coord.Check(); err != nil {
		return nil, err
	}
	return &Store{coord: coord}, nil
}

// check returns an error naming the store (or its coordinator) when s is
// not usable.
func (s *Store) check() error {
	if s == nil {
		return coordination.InvalidArgument("store", "must not be nil; use idempotency.New")
	}
	return s.coord.Check()
}

// checkOwned validates the arguments of Complete and Abandon.
func (s *Store) checkOwned(key, owner string) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return err
	}
	if owner == "" {
		return coordination.InvalidArgument("owner", "must not be empty; use the Owner of a Started claim")
	}
	return nil
}

// BeginOption configures one [Store.Begin] call.
type BeginOption func(*beginOptions)

type beginOptions struct {
	fingerprint    *string
	resultTTL      time.Duration
	resultTTLGiven bool
	wait           time.Duration
}

// WithFingerprint records fp, a digest of the request the key stands for,
// with a new claim, and compares it with the fingerprint of an existing
// claim: a different one answers [FingerprintMismatch]. fp may hold any
// bytes. Giving no fingerprint is not the same as giving an empty one: a
// claim made without a fingerprint does not match a request with one (even
// an empty one), and the other way round. Give the same fingerprint on every
// attempt of a request, retries included. The default is no fingerprint.
func WithFingerprint(fp string) BeginOption {
	return func(o *beginOptions) { o.fingerprint = &fp }
}

// WithResultTTL sets how long a completed result is kept: [Store.Complete]
// restarts the key's TTL with d (rounded up to whole milliseconds; at least
// 1 ms). It is recorded with a new claim only; a Begin that finds an
// existing claim never changes it. The default is the ttl given to Begin,
// which then bounds both the pending claim and the stored result.
func WithResultTTL(d time.Duration) BeginOption {
	return func(o *beginOptions) { o.resultTTL, o.resultTTLGiven = d, true }
}

// WithWait makes Begin wait, up to d, when it finds the key in progress:
// it returns as soon as the claim is completed (answering Completed),
// abandoned or expired (then the caller takes the key over: Started), or
// when d has passed (InProgress). It does not poll: it wakes on the
// notification that Complete and Abandon publish and at the claim's
// server-reported expiry, re-checking at least every 5 s in case a
// notification was lost. The default is 0: answer InProgress at once.
// Negative values are an argument error.
func WithWait(d time.Duration) BeginOption {
	return func(o *beginOptions) { o.wait = d }
}

// errWaitOver is the cause of the context that bounds a WithWait wait.
var errWaitOver = errors.New("idempotency: wait bound reached")

// Begin claims key for the caller, or reports what holds it, in one round
// trip (one script; admitted once as IDEMPOTENCY BEGIN):
//
//   - no claim (never claimed, expired, or abandoned): a new pending claim
//     owned by a fresh random token is created with TTL ttl; the answer is
//     Started with that token in [Claim.Owner];
//   - a claim with a different fingerprint (see [WithFingerprint]):
//     FingerprintMismatch;
//   - a completed claim: Completed with the stored result;
//   - a pending claim of another caller: InProgress (see [WithWait]).
//
// A Begin that finds an existing claim never changes it: not its TTL, not
// its result TTL, not its fingerprint. ttl is rounded up to whole
// milliseconds and must be at least 1 ms. Choose it longer than the work
// takes: when a pending claim expires (its owner crashed, or is slow), the
// next Begin takes the key over with a new token, and the old owner's
// Complete and Abandon then return false.
//
// Errors: coordination.ErrInvalidArgument naming store, coord, key, ttl,
// result ttl or wait, with nothing sent; an error matching
// coordination.ErrWrongType (with ErrBadState) when key holds another Redis
// type, or coordination.ErrBadState when the hash is not a claim this
// package wrote, both detected before anything is written; the hook's
// error when a hook rejects; Redis and network errors as go-redis returns
// them; ctx's error. When the outcome is ambiguous (the reply was lost: a
// timeout, a cancelled ctx, a broken connection) a claim may have been
// created that the caller never learnt about; a background owner-checked
// Abandon with the same token removes it, so a retry is not blocked until
// the claim's TTL (see the package documentation for re-sends).
func (s *Store) Begin(ctx context.Context, key string, ttl time.Duration, opts ...BeginOption) (Claim, error) {
	if err := s.check(); err != nil {
		return Claim{}, err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return Claim{}, err
	}
	ttlMs, err := coordination.Millis("ttl", ttl)
	if err != nil {
		return Claim{}, err
	}
	var o beginOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	resultMs := ttlMs
	if o.resultTTLGiven {
		if resultMs, err = coordination.Millis("result ttl", o.resultTTL); err != nil {
			return Claim{}, err
		}
	}
	if o.wait < 0 {
		return Claim{}, coordination.InvalidArgument("wait", "must not be negative, got %v", o.wait)
	}
	token, err := coordination.NewOwnerToken()
	if err != nil {
		return Claim{}, err
	}
	ctx, finish, err := s.coord.Admit(ctx, hooks.IdempotencyBegin, primitive)
	if err != nil {
		return Claim{}, err
	}
	args := []any{token, ttlMs, resultMs, "0", ""}
	if o.fingerprint != nil {
		args[3], args[4] = "1", *o.fingerprint
	}
	var ambiguous bool // some attempt's outcome is unknown
	try := func(ctx context.Context) (Claim, error) {
		c, err := s.begin(ctx, key, token, args)
		if coordination.IsAmbiguous(err) {
			ambiguous = true
		}
		return c, err
	}
	claim, err := try(ctx)
	if err == nil && claim.State == InProgress && o.wait > 0 {
		claim, err = s.wait(ctx, key, o.wait, claim, try)
	}
	if ambiguous && (err != nil || claim.State != Started) {
		// An attempt whose reply was lost may have created a claim owned by
		// token that nobody will finish: remove it, owner-checked.
		lease.Cleanup(s.coord, "idempotency begin", func(ctx context.Context) error {
			_, err := s.abandon(ctx, key, token)
			return err
		})
	}
	if err != nil {
		return Claim{}, finish(err)
	}
	s.coord.Int64Counter("coordination.idempotency.begins",
		"Idempotency Begin answers, by state found.", "{begin}").
		Add(context.Background(), 1, metric.WithAttributes(attribute.String("state", claim.State.metricName())))
	return claim, finish(nil)
}

// wait retries try (same owner token, so a re-run never creates a second
// claim) on every completion or abandonment notification for key and at
// the claim's expiry, until the answer is not InProgress or d has passed.
// first is the InProgress answer already received. Transient errors are
// retried. When d passes it returns the last answer received, or the last
// error if the last attempt failed for another reason than the bound.
func (s *Store) wait(ctx context.Context, key string, d time.Duration, first Claim,
	try func(context.Context) (Claim, error)) (Claim, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, d, errWaitOver)
	defer cancel()
	last, skip := first, true
	var lastErr error
	err := waitloop.Run(wctx, s.coord, key, waitloop.Config{}, func(ctx context.Context) (waitloop.Attempt, error) {
		if skip {
			// The first answer is already known: go straight to subscribing.
			skip = false
			return waitloop.Attempt{RetryIn: first.Remaining}, nil
		}
		c, err := try(ctx)
		if err != nil {
			lastErr = err
			return waitloop.Attempt{}, err
		}
		last, lastErr = c, nil
		return waitloop.Attempt{Done: c.State != InProgress, RetryIn: c.Remaining}, nil
	})
	switch {
	case err == nil:
		return last, nil
	case ctx.Err() != nil:
		return Claim{}, context.Cause(ctx)
	case errors.Is(context.Cause(wctx), errWaitOver):
		// Our own bound ran out. An attempt it interrupted does not count.
		if lastErr != nil && coordination.Classify(lastErr) != coordination.Canceled {
			return Claim{}, lastErr
		}
		return last, nil
	default:
		return Claim{}, err
	}
}

// begin runs the begin script once and decodes its reply.
func (s *Store) begin(ctx context.Context, key, token string, args []any) (Claim, error) {
	cmd, err := s.coord.Eval(ctx, lua.IdempotencyBegin, []string{key}, args...)
	if err != nil {
		return Claim{}, err
	}
	return decodeBegin(cmd, token)
}

// decodeBegin turns the begin script's reply {1} / {2, result} /
// {3, pttl_ms} / {4} into a Claim.
func decodeBegin(cmd *redis.Cmd, token string) (Claim, error) {
	v, err := cmd.Slice()
	if err != nil {
		return Claim{}, err
	}
	bad := func() (Claim, error) { return Claim{}, coordination.UnexpectedReply(lua.IdempotencyBegin.Name(), v) }
	if len(v) == 0 {
		return bad()
	}
	code, ok := v[0].(int64)
	if !ok {
		return bad()
	}
	switch {
	case code == 1 && len(v) == 1:
		return Claim{State: Started, Owner: token}, nil
	case code == 2 && len(v) == 2:
		res, ok := v[1].(string)
		if !ok {
			return bad()
		}
		return Claim{State: Completed, Result: []byte(res)}, nil
	case code == 3 && len(v) == 2:
		pttl, ok := v[1].(int64)
		if !ok || pttl < 0 {
			return bad()
		}
		return Claim{State: InProgress, Remaining: time.Duration(pttl) * time.Millisecond}, nil
	case code == 4 && len(v) == 1:
		return Claim{State: FingerprintMismatch}, nil
	}
	return bad()
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
// (and may have been taken over by another caller, whose claim is left
// alone), was abandoned, or was already completed by an earlier Complete
// (whose result is kept). A false answer after the work ran means the work
// may run again elsewhere.
//
// Errors: coordination.ErrInvalidArgument naming store, coord, key or owner
// (empty), with nothing sent; coordination.ErrWrongType /
// coordination.ErrBadState when the key holds something this package did
// not write (nothing is written); the hook's error; Redis, network and ctx
// errors. After an ambiguous error the result may or may not be stored:
// [Store.Begin] with the same fingerprint tells (Completed, or InProgress
// while the claim is still pending). Calling Complete again then returns
// false in both cases, because each call carries its own completion id.
func (s *Store) Complete(ctx context.Context, key, owner string, result []byte) (bool, error) {
	if err := s.checkOwned(key, owner); err != nil {
		return false, err
	}
	id, err := coordination.NewOwnerToken()
	if err != nil {
		return false, err
	}
	ctx, finish, err := s.coord.Admit(ctx, hooks.IdempotencyComplete, primitive)
	if err != nil {
		return false, err
	}
	if result == nil {
		result = []byte{}
	}
	cmd, err := s.coord.Eval(ctx, lua.IdempotencyComplete, []string{key}, owner, result, id, s.coord.Channel(key))
	if err != nil {
		return false, finish(err)
	}
	ok, err := decodeFlag(cmd, lua.IdempotencyComplete)
	return ok, finish(err)
}

// Abandon deletes the pending claim on key if owner (the token of a Started
// [Claim]) still owns it, so that the next Begin starts afresh, and wakes
// callers waiting in Begin. One round trip, admitted as IDEMPOTENCY
// ABANDON. Use it when the work failed in a way that is safe to run again
// (nothing happened yet, or the failure was rolled back). Do not abandon
// after a failure that may have left side effects: let the claim expire
// instead, or complete it with a result that describes the failure.
//
// It reports whether this call deleted the claim. It returns false, and
// changes nothing, when there is no claim (it expired or was abandoned
// before), when another caller owns it (the caller's expired and was taken
// over), or when it is completed: a stored result is never removed.
//
// Errors: those of [Store.Complete]. An ambiguous error is settled by
// calling Abandon again: afterwards no pending claim of owner remains,
// whatever the first call did (the second then reports false if the first
// deleted the claim).
func (s *Store) Abandon(ctx context.Context, key, owner string) (bool, error) {
	if err := s.checkOwned(key, owner); err != nil {
		return false, err
	}
	ctx, finish, err := s.coord.Admit(ctx, hooks.IdempotencyAbandon, primitive)
	if err != nil {
		return false, err
	}
	ok, err := s.abandon(ctx, key, owner)
	return ok, finish(err)
}

// abandon runs the abandon script once (also used, unadmitted, by the
// background cleanup after an ambiguous Begin).
func (s *Store) abandon(ctx context.Context, key, owner string) (bool, error) {
	cmd, err := s.coord.Eval(ctx, lua.IdempotencyAbandon, []string{key}, owner, s.coord.Channel(key))
	if err != nil {
		return false, err
	}
	return decodeFlag(cmd, lua.IdempotencyAbandon)
}

// decodeFlag decodes a 1/0 script reply.
func decodeFlag(cmd *redis.Cmd, s *lua.Script) (bool, error) {
	n, err := cmd.Int64()
	if err != nil {
		return false, err
	}
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, coordination.UnexpectedReply(s.Name(), n)
}
