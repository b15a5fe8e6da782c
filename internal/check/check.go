// Package check holds the argument checks every public operation runs
// before anything is admitted or sent: the size bounds and their checks,
// keys, millisecond durations, a nil context, the errors naming a bad
// argument (wrapping sentinel.ErrInvalidArgument), and the functional
// option helpers (Apply, AtLeast). It knows no primitive and no engine.
package check

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/coordkit/coordination/internal/sentinel"
)

// Size bounds. Every argument that the library stores in Redis or sends in
// a script call has a maximum size, checked before anything is admitted or
// sent: a longer one is an error from [InvalidArgument] naming it. The
// bounds keep one call's work on the server's single thread small and
// predictable (a key is also hashed, published as a channel name and
// copied into every reply that names it), and catch a caller that passes
// a whole document where an identifier was meant.
const (
	// MaxKeyBytes bounds a key (before the coordinator's prefix) and a
	// field lease's field name: 1 KiB. Redis allows 512 MB, but keys are
	// identifiers; Redis' own guidance is to keep them short, and 1 KiB
	// holds any URL-ish name or a hash of a longer one.
	MaxKeyBytes = 1 << 10
	// MaxIdentityBytes bounds an identity stored with a lease or a list
	// entry: a leader's identity, a fencing lock's holder
	// (fencing.WithHolder), a deny-list identity, an owner token
	// handed back (the library's are 22 bytes): 256 bytes, room for a
	// host name, a pod name and a process id.
	MaxIdentityBytes = 256
	// MaxFingerprintBytes bounds an idempotency request fingerprint: 1 KiB
	// (the default fingerprint, a hex SHA-256, is 64 bytes; a longer one
	// is better hashed).
	MaxFingerprintBytes = 1 << 10
	// MaxValueBytes bounds a stored value: an idempotency result given to
	// Store.Complete, a fencing.Guarded.Set value: 16 MiB. The HTTP
	// middleware's stored responses have their own, lower, configurable
	// bound (idempotency.WithMaxResponseBytes, 1 MiB by default, at most
	// this).
	MaxValueBytes = 16 << 20
)

// Size returns an error from [InvalidArgument] naming name when n
// bytes exceed max.
func Size(name string, n, max int) error {
	if n > max {
		return InvalidArgument(name, "is %d bytes long; at most %d are allowed", n, max)
	}
	return nil
}

// InvalidArgument returns an error wrapping [sentinel.ErrInvalidArgument] that names
// the argument and says what is wrong with it.
func InvalidArgument(name, format string, args ...any) error {
	return &argumentError{name: name, reason: fmt.Sprintf(format, args...)}
}

type argumentError struct{ name, reason string }

// Error returns the error's message.
func (e *argumentError) Error() string {
	return "coordination: invalid argument " + e.name + ": " + e.reason
}

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *argumentError) Unwrap() error { return sentinel.ErrInvalidArgument }

// ArgumentName returns the name of the argument an error from
// [InvalidArgument] names, and false for any other error.
func ArgumentName(err error) (string, bool) {
	var a *argumentError
	if errors.As(err, &a) {
		return a.name, true
	}
	return "", false
}

// Plural returns "1 NOUN" or "N NOUNs", for messages that count things
// ("1 permit", "3 permits").
func Plural(n int, noun string) string {
	if n == 1 || n == -1 {
		return strconv.Itoa(n) + " " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Key returns an error wrapping [sentinel.ErrInvalidArgument] naming name when
// key is empty or longer than [MaxKeyBytes]. Keys are otherwise
// binary-safe.
func Key(name, key string) error {
	if key == "" {
		return InvalidArgument(name, "must not be empty")
	}
	return Size(name, len(key), MaxKeyBytes)
}

// MaxMillis is the longest duration Millis takes: the whole milliseconds
// a time.Duration holds (about 292 years). Longer would round up past
// what a time.Duration can hold, and a PTTL reply of it would overflow
// go-redis' conversion into a negative duration.
const MaxMillis = time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond

// Millis converts a duration to the integer milliseconds the scripts take,
// rounding a sub-millisecond part up (never shortening a lease or window),
// and returns an error naming name when d is below one millisecond or
// above MaxMillis.
func Millis(name string, d time.Duration) (int64, error) {
	if d < time.Millisecond {
		return 0, InvalidArgument(name, "must be at least 1ms, got %v", d)
	}
	if d > MaxMillis {
		return 0, InvalidArgument(name, "must be at most %v, got %v", MaxMillis, d)
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
	if noExpiry {
		if ttl == 0 {
			return 0, nil
		}
		if ttl < time.Millisecond {
			return 0, InvalidArgument("ttl", "must be 0 (no expiry) or at least 1ms, got %v", ttl)
		}
	}
	return Millis("ttl", ttl)
}

// NilContext returns the error of an operation called with a nil context:
// it wraps [sentinel.ErrInvalidArgument] naming "ctx". The engine's Admit and AdmitGroup
// return it before anything else; an operation that uses its context
// before admission checks with [Context] first.
func NilContext() error {
	return InvalidArgument("ctx", "must not be nil; use context.Background() or context.TODO()")
}

// Context returns [NilContext] for a nil ctx, and nil otherwise.
func Context(ctx context.Context) error {
	if ctx == nil {
		return NilContext()
	}
	return nil
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
// duration with least 1 ms, the check and the error of [Millis]). A
// time.Duration above [MaxMillis] fails as in Millis too. Like every
// option it checks when it is applied, not when it is built. Its result
// converts to a package's named option type (type Option func(*config)
// error).
func AtLeast[T any, N ~int | ~int64](name string, v, least N, set func(*T)) func(*T) error {
	return func(cfg *T) error {
		d, isDuration := any(v).(time.Duration)
		switch {
		case isDuration && d > MaxMillis:
			return InvalidArgument(name, "must be at most %v, got %v", MaxMillis, d)
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

// Token returns an error wrapping sentinel.ErrInvalidArgument naming
// "token" unless token has the shape of an owner token (22 characters of
// base64url, as the engine's NewToken makes them; isToken tells).
func Token(token string, isToken func(string) bool) error {
	if !isToken(token) {
		return InvalidArgument("token", "must be an owner token (22 characters of base64url, as Lease.Token returns), got %q", token)
	}
	return nil
}
