package idempotency

import (
	"context"
	"errors"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// Errors returned by [Store.Do]. They match the sentinels of package
// coordination noted below with errors.Is; their messages are their own
// (they do not quote the sentinel's).
var (
	// ErrInProgress is returned by Do when another caller owns a pending
	// claim on the key. It matches coordination.ErrNotAcquired. It is an
	// answer, not a failure.
	ErrInProgress error = &sentinelError{msg: "idempotency: request in progress", is: coordination.ErrNotAcquired}

	// ErrFingerprintMismatch is returned by Do when the key was claimed by
	// a request with a different fingerprint. It is an answer, not a
	// failure.
	ErrFingerprintMismatch = errors.New("idempotency: key already used for a different request")

	// ErrClaimLost is returned by Do when fn succeeded but its result could
	// not be stored because the claim was no longer the caller's: it
	// expired before fn returned, or was deleted with [Store.Forget] (and
	// may since have been taken over by another caller); the server's
	// answer does not tell which. fn may then run again elsewhere. It
	// matches coordination.ErrLost, as every lease lost while held does.
	ErrClaimLost error = &sentinelError{msg: "idempotency: claim no longer held at completion (expired or forgotten)", is: coordination.ErrLost}

	// ErrOutcomeUnknown is returned by Do when an earlier attempt under
	// the key failed in a way that was not safe to retry (its fn returned
	// an error not marked [RetrySafe], or [Store.Fail] was called): that
	// attempt may or may not have had its effects, so Do does not run fn
	// again until the failed claim expires (see [Failed]) or is deleted
	// with [Store.Forget]. It matches coordination.ErrNotAcquired (the
	// claim was not given to the caller), as ErrInProgress does. It is an
	// answer, not a failure of the store; [Store.Begin] tells how long the
	// key stays failed ([Claim.Remaining]).
	ErrOutcomeUnknown error = &sentinelError{msg: "idempotency: an earlier attempt failed, outcome unknown", is: coordination.ErrNotAcquired}
)

// sentinelError is one of this package's sentinel errors that matches a
// sentinel of package coordination: it reads as its own message alone,
// and errors.Is sees the coordination sentinel through Unwrap.
type sentinelError struct {
	msg string
	is  error
}

// Error returns the error's own message.
func (e *sentinelError) Error() string { return e.msg }

// Unwrap returns the coordination sentinel the error matches.
func (e *sentinelError) Unwrap() error { return e.is }

func init() {
	// Answers, not failures: hooks see these operations as Succeeded.
	sentinel.RegisterAnswers(ErrFingerprintMismatch)
}

// settleTimeout bounds the Complete or Abandon that Do and the middleware
// send after the work, which runs even when the caller's context has ended.
const settleTimeout = 5 * time.Second

// RetrySafe marks err, returned by the fn of [Store.Do], as a failure after
// which running fn again is safe (nothing happened, or everything was
// rolled back). Do then abandons the claim so that the next attempt runs fn
// again, instead of keeping it until it expires. The returned error wraps
// err (errors.Is and errors.As see through it). RetrySafe(nil) is nil.
func RetrySafe(err error) error {
	if err == nil {
		return nil
	}
	return &retrySafeError{err: err}
}

type retrySafeError struct{ err error }

// Error returns the marked error's text unchanged.
func (e *retrySafeError) Error() string { return e.err.Error() }

// Unwrap returns the marked error.
func (e *retrySafeError) Unwrap() error { return e.err }

// IsRetrySafe reports whether err was marked with [RetrySafe].
func IsRetrySafe(err error) bool {
	var rs *retrySafeError
	return errors.As(err, &rs)
}

// Do runs fn at most once per key while the key's claim lasts, and replays
// its stored result afterwards. It calls [Store.Begin] with
// [WithFingerprint](fingerprint) followed by opts (so a later
// WithFingerprint in opts wins), then:
//
//   - Started: it runs fn with a context derived from ctx, keeping the
//     claim alive meanwhile ([Store.KeepAlive]: renewed every ttl/3; the
//     context is cancelled, cause matching coordination.ErrLost, when the
//     claim is lost), unless opts hold [WithKeepAlive](false). fn reads the
//     claim's fencing token with [FenceFrom] on its context and passes it
//     to its writes. When fn succeeds, Do stores its result
//     with [Store.Complete] and returns (result, false, nil). When
//     Complete reports the claim lost, it returns (result, false,
//     ErrClaimLost).
//   - Completed: it returns (stored result, true, nil) without running fn.
//   - InProgress: it returns (nil, false, ErrInProgress) without running fn.
//     Use [WithWait] in opts to wait for the original instead.
//   - FingerprintMismatch: (nil, false, ErrFingerprintMismatch).
//   - Failed: it returns (nil, false, ErrOutcomeUnknown) without running
//     fn (an earlier attempt failed, see below).
//
// When fn fails, Do returns its error and marks the claim failed
// ([Store.Fail]): fn may have had side effects before failing, so a retry
// must not run it again at once. Until the claim's TTL ends (at most ttl
// after the failure) every retry with the same key gets
// ErrOutcomeUnknown at once, and callers waiting with [WithWait] are
// woken with it; afterwards the next Do runs fn again. To retry sooner,
// check the outcome, then delete the record with [Store.Forget]. When the
// failure is safe to retry, return [RetrySafe](err) from fn: Do then
// abandons the claim and the next attempt runs fn again. When fn panics,
// the claim is marked failed too and the panic propagates. The Complete,
// Fail or Abandon after fn is sent even if ctx has ended by then (bounded
// by 5 s).
//
// A result over 16 MiB (the bound of [Store.Complete]) is not stored: Do
// marks the claim failed and returns the result with an error wrapping
// coordination.ErrInvalidArgument naming "result".
//
// fingerprint is always sent, so an empty string is an empty fingerprint,
// which a claim made by [Store.Begin] without [WithFingerprint] does not
// match. Other errors are those of Begin and Complete (a Complete error
// comes with fn's result: the result may or may not be stored, see
// [Store.Complete]); an Abandon or Fail error is joined to fn's error.
func (s *Store) Do(ctx context.Context, key string, ttl time.Duration, fingerprint string,
	fn func(ctx context.Context) ([]byte, error), opts ...BeginOption) (result []byte, replayed bool, err error) {
	if fn == nil {
		// Refused where Do would begin, naming that operation (nothing admitted).
		_, k, err := s.checkKey(hooks.IdempotencyBegin, key)
		if err != nil {
			return nil, false, err
		}
		return nil, false, engine.OpError(hooks.IdempotencyBegin, k, check.InvalidArgument("fn", "must not be nil"))
	}
	claim, err := s.Begin(ctx, key, ttl, append([]BeginOption{WithFingerprint(fingerprint)}, opts...)...)
	if err != nil {
		return nil, false, err
	}
	switch claim.State {
	case Completed:
		return claim.Result, true, nil
	case InProgress:
		return nil, false, s.named(hooks.IdempotencyBegin, key, ErrInProgress)
	case FingerprintMismatch:
		return nil, false, s.named(hooks.IdempotencyBegin, key, ErrFingerprintMismatch)
	case Failed:
		return nil, false, s.named(hooks.IdempotencyBegin, key, ErrOutcomeUnknown)
	}
	work := context.WithValue(ctx, fenceKey{}, claim.Fence)
	if !cfgOf(opts).noKeepAlive {
		kctx, stop, err := s.KeepAlive(work, key, claim, ttl)
		if err != nil {
			return nil, false, err
		}
		defer stop()
		work = kctx
	}
	settled := false
	defer func() {
		if !settled {
			// fn panicked: it may have had effects.
			s.failAfter(ctx, key, claim.Owner)
		}
	}()
	res, ferr := fn(work)
	settled = true
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if ferr != nil {
		end := s.Fail
		if IsRetrySafe(ferr) {
			end = s.Abandon
		}
		if _, serr := end(sctx, key, claim.Owner); serr != nil {
			return nil, false, errors.Join(ferr, serr) // serr names IDEMPOTENCY ABANDON or FAIL and the key
		}
		return nil, false, ferr
	}
	if err := check.Size("result", len(res), check.MaxValueBytes); err != nil {
		// fn ran, but its result cannot be stored: as for a failure.
		err = s.named(hooks.IdempotencyComplete, key, err)
		if _, ferr := s.Fail(sctx, key, claim.Owner); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return res, false, err
	}
	ok, err := s.Complete(sctx, key, claim.Owner, res)
	if err != nil {
		return res, false, err
	}
	if !ok {
		return res, false, s.named(hooks.IdempotencyComplete, key, ErrClaimLost)
	}
	return res, false, nil
}

// failAfter marks the claim failed after its work panicked, sent even if
// ctx has ended (bounded by settleTimeout); an error is left to the
// claim's TTL (the claim then stays pending until it expires).
func (s *Store) failAfter(ctx context.Context, key, owner string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, _ = s.Fail(sctx, key, owner)
}

// named returns err naming the operation op and key as the caller gave it,
// as every error of the library does (errors.Is(err, ErrInProgress) and
// the like keep working).
func (s *Store) named(op, key string, err error) error {
	e, eerr := s.engine()
	if eerr != nil {
		return err
	}
	return engine.OpError(op, e.Key(key), err)
}

// WithKeepAlive sets whether [Store.Do] keeps the claim alive while fn
// runs. The default is true; with WithKeepAlive(false) the claim lasts ttl
// whatever fn does, and a retry after ttl runs fn again even if the
// original is still running. [Store.Begin] ignores it.
func WithKeepAlive(on bool) BeginOption {
	return func(c *beginConfig) error {
		c.noKeepAlive = !on
		return nil
	}
}

// cfgOf returns the configuration opts give (Begin has checked them).
func cfgOf(opts []BeginOption) beginConfig {
	var c beginConfig
	for _, o := range opts {
		if o != nil {
			_ = o(&c)
		}
	}
	return c
}
