package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/sentinel"
)

// ErrNotHeld (the lease is not held by the token given, or is free) is an
// answer of Adopt and Holder: the operation worked and the answer was no.
func init() { sentinel.RegisterAnswers(sentinel.ErrNotHeld) }

// NoExpiry is the Remaining of a holder without expiry: the largest
// time.Duration, as a held handle's Remaining for a lease without expiry.
const NoExpiry = forever

// notHeld is the error of an Adopt that found the lease not held by the
// token given, wrapping sentinel.ErrNotHeld.
var notHeld error = &notHeldError{}

type notHeldError struct{}

// Error says the lease is not held by the owner token Adopt was given.
func (*notHeldError) Error() string { return "coordination: not held by this owner token" }

// Unwrap returns sentinel.ErrNotHeld, which errors.Is matches.
func (*notHeldError) Unwrap() error { return sentinel.ErrNotHeld }

// Free is the error of a Holder read that found the lease free, wrapping
// sentinel.ErrNotHeld.
var Free error = &freeError{}

type freeError struct{}

// Error says the lease is free (no holder at all).
func (*freeError) Error() string { return "coordination: not held (the lease is free)" }

// Unwrap returns sentinel.ErrNotHeld, which errors.Is matches.
func (*freeError) Unwrap() error { return sentinel.ErrNotHeld }

// ReadTTL is what an Adopt's read learnt, in one command: whether the
// lease is held by the token, and then its remaining TTL on the server
// (NoExpiry for none).
type ReadTTL struct {
	Held bool
	TTL  time.Duration
	// Kind and ID, when set, replace the kind and the id AdoptHeld was
	// given (a lease whose mode or member only the read tells: a
	// read-write lease's, a semaphore permit's).
	Kind *LeaseKind
	ID   []any
}

// AdoptHeld returns the handle of a lease that id holds already (the owner
// token of a process that restarted), admitted once as op under kind's
// primitive: read runs one command that reports whether id holds the
// lease and its remaining TTL on the server. The handle's local deadline
// is that TTL from the instant before the read was sent (less the drift
// allowance), and its TTL (what KeepAlive renews to) is that remaining
// TTL; nothing is written, the TTL is not extended. A lease not held by id
// is an error wrapping sentinel.ErrNotHeld; one without expiry (written by hand) for
// a kind without NoExpiry, an error wrapping sentinel.ErrBadState.
func (e *Engine) AdoptHeld(ctx context.Context, op string, kind *LeaseKind, keys Keys, id []any, read func(ctx context.Context) (ReadTTL, error)) (*Handle, error) {
	ctx, o, err := e.Admit(ctx, op, kind.Primitive, keys)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	r, err := read(ctx)
	if err != nil {
		return nil, o.End(err)
	}
	if !r.Held {
		return nil, o.End(notHeld)
	}
	if r.Kind != nil {
		kind = r.Kind
	}
	if r.ID != nil {
		id = r.ID
	}
	ttl := r.TTL
	if ttl == NoExpiry {
		if !kind.NoExpiry {
			return nil, o.End(fmt.Errorf("%w: the lease has no TTL (written by hand); it cannot be adopted", sentinel.ErrBadState))
		}
		ttl = 0
	}
	return newHandle(e, kind, keys.head(kind.HandleKeys), id, sent, ttl), o.End(nil)
}

// ForceRelease runs release, an owner-checked release script marked
// [Script.Once] (sent at most once), with the arguments args returns on
// keys, admitted once as op under primitive, and reports whether it
// removed a live holding (decode.Released). args runs inside the
// admitted operation (a read that finds the holding's member costs a round
// trip of its own); nil arguments mean the token holds nothing: nothing is
// sent, and the answer is false. Waiters are woken by the script as by the
// holder's own release.
//
// refused, when not nil, runs when the release answered anything but
// Released (it wrote nothing to the lease key): a release that only
// compares the stored owner with the token cannot tell a value outside
// the kind's layout from another owner's, so refused reads the key (a
// holder read) and returns its error: one wrapping sentinel.ErrBadState
// (such a value) is the operation's; any other answer or error of the
// read is ignored (the release's answer stands). Kinds whose
// args read the holders first pass nil (the read refuses it already).
func (e *Engine) ForceRelease(ctx context.Context, op, primitive string, keys Keys, release *Script[decode.Outcome], args func(context.Context) ([]any, error), refused func(context.Context) error) (bool, error) {
	ctx, o, err := e.Admit(ctx, op, primitive, keys)
	if err != nil {
		return false, err
	}
	a, err := args(ctx)
	if err != nil || a == nil {
		return false, o.End(err)
	}
	out, err := release.Run(ctx, e, keys, a...)
	if err != nil {
		return false, o.End(err)
	}
	if out != decode.Released && refused != nil {
		if err := refused(ctx); errors.Is(err, sentinel.ErrBadState) {
			return false, o.End(err)
		}
	}
	return out == decode.Released, o.End(nil)
}
