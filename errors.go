package coordination

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Shared sentinel errors. Every primitive returns these (wrapped with
// context), so errors.Is works the same way across packages.
var (
	// ErrNotAcquired is returned when a lease, lock, permit or claim could
	// not be acquired because it is held by someone else (contention), by
	// APIs that report contention as an error. A blocking acquire that gives
	// up because its context ended returns [GaveUp](ctx), which matches both
	// ErrNotAcquired and the context's cause.
	ErrNotAcquired = errors.New("coordination: not acquired")

	// ErrNotHeld is returned when an operation needs a lease the caller no
	// longer holds: it was released, expired, or taken over.
	ErrNotHeld = errors.New("coordination: not held")

	// ErrLost is the cause of a handle's context when ownership was lost or
	// became uncertain: a renewal found the lease gone, the local lease
	// deadline passed before a renewal succeeded, or a renewal's outcome
	// could not be known.
	ErrLost = errors.New("coordination: lease lost")

	// ErrReleased is the cause of a handle's context after the holder
	// released it.
	ErrReleased = errors.New("coordination: released")

	// ErrCrossSlot is returned when the keys of a multi-key operation do not
	// hash to the same Redis Cluster slot. It is detected on the client from
	// the prefixed keys before anything is sent, whatever the client type;
	// use one {hash tag} in every key of the operation.
	ErrCrossSlot = errors.New("coordination: keys hash to different cluster slots")

	// ErrUnsupportedServer is returned when the server lacks a feature an
	// operation needs. The wrapping error names the feature and the version
	// that introduced it.
	ErrUnsupportedServer = errors.New("coordination: unsupported server")

	// ErrInvalidArgument is returned for bad input: an empty key, a duration
	// below one millisecond, a nil coordinator, a negative count. The
	// wrapping error names the argument and why. Nothing is sent to Redis.
	ErrInvalidArgument = errors.New("coordination: invalid argument")

	// ErrBadState is returned when a script finds a key that holds something
	// it did not write: a malformed or negative fencing counter, a counter
	// with a TTL, a key of the wrong Redis type, a corrupt record. Scripts
	// detect this before writing anything.
	ErrBadState = errors.New("coordination: key holds unexpected state")

	// ErrWrongType is returned (together with ErrBadState) when a key holds
	// a value of the wrong Redis type for the primitive.
	ErrWrongType = errors.New("coordination: key holds the wrong type")

	// ErrCounterOverflow is returned (together with ErrBadState) when a
	// fencing counter is at 9223372036854775807 and cannot be incremented.
	ErrCounterOverflow = errors.New("coordination: fencing counter would overflow")

	// ErrCapacityMismatch is returned when a caller's capacity differs from
	// the capacity recorded in a key that has live holders (semaphores).
	ErrCapacityMismatch = errors.New("coordination: capacity mismatch")

	// ErrConfigMismatch is returned when a caller's settings differ from the
	// settings recorded in a key (rate limiters, latches).
	ErrConfigMismatch = errors.New("coordination: configuration mismatch")

	// ErrClosed is returned by operations on a closed limiter, elector or
	// other closable object.
	ErrClosed = errors.New("coordination: closed")
)

// InvalidArgument returns an error wrapping [ErrInvalidArgument] that names
// the argument and says what is wrong with it, e.g.
// InvalidArgument("ttl", "must be at least 1ms, got %v", ttl).
func InvalidArgument(name, format string, args ...any) error {
	return &ArgumentError{Name: name, Reason: fmt.Sprintf(format, args...)}
}

// ArgumentError is the error returned for bad input. It wraps
// [ErrInvalidArgument].
type ArgumentError struct {
	// Name is the argument's name as documented, e.g. "ttl" or "key".
	Name string
	// Reason says what is wrong, e.g. "must not be empty".
	Reason string
}

// Error returns "coordination: invalid argument NAME: REASON".
func (e *ArgumentError) Error() string {
	return "coordination: invalid argument " + e.Name + ": " + e.Reason
}

// Unwrap returns [ErrInvalidArgument].
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

// ScriptError is an error reply raised by one of the library's scripts with
// a stable code (the first word of the reply, e.g. COORD_BADCOUNTER). It
// matches the sentinel of its code with errors.Is.
type ScriptError struct {
	// Code is the stable error code, e.g. "COORD_BADCOUNTER".
	Code string
	// Detail is the rest of the reply text.
	Detail string
}

// scriptCodes maps each script error code to the sentinels it matches.
var scriptCodes = map[string][]error{
	"COORD_CROSSSLOT":         {ErrCrossSlot},
	"COORD_BADCOUNTER":        {ErrBadState},
	"COORD_OVERFLOW":          {ErrBadState, ErrCounterOverflow},
	"COORD_WRONGTYPE":         {ErrBadState, ErrWrongType},
	"COORD_BADSTATE":          {ErrBadState},
	"COORD_CAPACITY_MISMATCH": {ErrCapacityMismatch},
	"COORD_CONFIG_MISMATCH":   {ErrConfigMismatch},
	"COORD_UNSUPPORTED":       {ErrUnsupportedServer},
	"COORD_BADARG":            {ErrInvalidArgument},
}

// Error returns "coordination: DETAIL (CODE)".
func (e *ScriptError) Error() string {
	return "coordination: " + e.Detail + " (" + e.Code + ")"
}

// Is reports whether target is one of the sentinels of e's code.
func (e *ScriptError) Is(target error) bool {
	for _, s := range scriptCodes[e.Code] {
		if s == target {
			return true
		}
	}
	return false
}

// mapScriptError turns an error reply starting with a COORD_ code into a
// *ScriptError; every other error is returned unchanged.
func mapScriptError(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	// miniredis prefixes script errors with "ERR Error ...: "; real servers
	// return the script's text as is. Look for the code anywhere.
	i := strings.Index(msg, "COORD_")
	if i < 0 {
		return err
	}
	msg = msg[i:]
	code, detail, _ := strings.Cut(msg, " ")
	if _, ok := scriptCodes[code]; !ok {
		return err
	}
	// Real servers append " script: <sha>, on @user_script:N." to errors
	// raised with error_reply only when raised by redis.call; keep the text.
	return &ScriptError{Code: code, Detail: detail}
}

// ErrorClass says how a retry loop should treat an error.
type ErrorClass int

const (
	// NoError is the class of a nil error.
	NoError ErrorClass = iota
	// Transient errors may succeed if the same operation is tried again
	// after a delay: LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
	// READONLY and NOREPLICAS replies, "max number of clients reached",
	// network errors, timeouts and connection-pool timeouts. Some are ambiguous (the command may have run); the
	// library's scripts are safe to re-run with the same owner token.
	Transient
	// Terminal errors will fail again if retried: authentication and
	// permission errors (NOAUTH, WRONGPASS, NOPERM), WRONGTYPE, script
	// errors with a COORD_ code, invalid arguments, a closed client, and
	// every error not known to be transient.
	Terminal
	// Canceled is the class of context.Canceled and
	// context.DeadlineExceeded: the caller gave up.
	Canceled
)

// String returns "none", "transient", "terminal" or "canceled".
func (c ErrorClass) String() string {
	switch c {
	case NoError:
		return "none"
	case Transient:
		return "transient"
	case Terminal:
		return "terminal"
	case Canceled:
		return "canceled"
	default:
		return fmt.Sprintf("ErrorClass(%d)", int(c))
	}
}

var transientPrefixes = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS",
	"ERR max number of clients reached"}

// Classify sorts an error returned by Redis, go-redis or this library into
// one class. It is the one place the library decides what to retry: every
// retry loop (blocking acquire, keep-alive, leader campaign, cleanup) uses
// it.
func Classify(err error) ErrorClass {
	if err == nil {
		return NoError
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	var se *ScriptError
	if errors.As(err, &se) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClosed) {
		return Terminal
	}
	if errors.Is(err, redis.ErrClosed) {
		return Terminal
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range transientPrefixes {
			if strings.HasPrefix(msg, p) {
				return Transient
			}
		}
		return Terminal
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return Transient
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return Transient
	}
	return Terminal
}

// IsTransient reports whether err is [Transient]: worth retrying after a
// delay.
func IsTransient(err error) bool { return Classify(err) == Transient }

// IsAmbiguous reports whether err leaves the outcome of a write unknown: the
// command may have run on the server although the client saw an error
// (a timeout, a cancelled context, a connection lost after writing). An
// error reply from the server (LOADING, READONLY, a script error) is not
// ambiguous: the server refused the command. Neither is an error that
// proves the command never left the client: a failed dial (connection
// refused) or a connection-pool timeout. Primitives clean up after an
// ambiguous acquire with an owner-checked release.
func IsAmbiguous(err error) bool {
	switch Classify(err) {
	case Canceled:
		return true
	case Transient:
		var re redis.Error
		return !errors.As(err, &re) && !neverSent(err)
	}
	return false
}

// neverSent reports whether err proves the command never reached a server.
func neverSent(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, redis.ErrPoolTimeout)
}

// UnexpectedReply returns an error wrapping [ErrBadState] for a script reply
// whose shape the client does not understand (a server or library version
// mismatch, or a key that holds something another program wrote). It
// describes the reply's shape only, never its contents, which may be large
// or secret.
func UnexpectedReply(script string, reply any) error {
	return fmt.Errorf("%w: unexpected reply from %s: %s", ErrBadState, script, shapeOf(reply))
}

func shapeOf(v any) string {
	switch r := v.(type) {
	case []any:
		return fmt.Sprintf("array of %d", len(r))
	case []string:
		return fmt.Sprintf("array of %d strings", len(r))
	case []int64:
		return fmt.Sprintf("array of %d integers", len(r))
	case string:
		return fmt.Sprintf("string of %d bytes", len(r))
	case nil:
		return "nil"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// MapError turns an error reply carrying one of the library's script codes
// (COORD_...) into a *[ScriptError]; any other error is returned unchanged.
// [Coordinator.Eval] applies it to every script reply.
func MapError(err error) error { return mapScriptError(err) }

// GaveUp returns the error of a blocking acquisition that gave up because
// ctx ended: it matches both [ErrNotAcquired] and context.Cause(ctx) with
// errors.Is, and reads as one line, e.g. "coordination: not acquired:
// context deadline exceeded".
func GaveUp(ctx context.Context) error {
	return &gaveUpError{cause: context.Cause(ctx)}
}

type gaveUpError struct{ cause error }

// Error returns ErrNotAcquired's text followed by the cause's, on one line.
func (e *gaveUpError) Error() string {
	if e.cause == nil {
		return ErrNotAcquired.Error()
	}
	return ErrNotAcquired.Error() + ": " + e.cause.Error()
}

// Unwrap returns ErrNotAcquired and the cause, for errors.Is and errors.As.
func (e *gaveUpError) Unwrap() []error { return []error{ErrNotAcquired, e.cause} }
