package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/lua"
)

// Script is one embedded Lua script with its strict reply decoder. Every
// script of the library is declared once, in a scripts_<primitive>.go file
// of this package, next to its decoder. It is immutable and safe for
// concurrent use.
type Script[R any] struct {
	name    string
	rs      *redis.Script
	decode  func(reply any) (R, bool)
	feature string // what the script needs that some servers lack; see Requires
}

// NewScript loads name.lua from package lua and pairs it with decode, which
// turns a reply into R and reports false for any reply it does not
// recognise (shape, type or code); a Lua false arrives as nil. A missing
// file panics at initialisation.
func NewScript[R any](name string, decode func(reply any) (R, bool)) *Script[R] {
	src, err := fs.ReadFile(lua.FS(), name+".lua")
	if err != nil {
		panic(fmt.Sprintf("engine: script %s: %v", name, err))
	}
	return &Script[R]{name: name, rs: redis.NewScript(string(src)), decode: decode}
}

// Name returns the script's name, e.g. "lock_acquire".
func (s *Script[R]) Name() string { return s.name }

// Hash returns the script's SHA1 in hex.
func (s *Script[R]) Hash() string { return s.rs.Hash() }

// Run runs the script as one round trip (EVALSHA, or EVAL after a NOSCRIPT
// reply) on the prefixed keys k and decodes the reply. Error replies are
// mapped by [MapError] (and, for a script marked with [Script.Requires], a
// command the server lacks to ErrUnsupportedServer); a reply the decoder
// does not recognise is an error wrapping [ErrBadState]
// ([UnexpectedReply]), never a silent default.
func (s *Script[R]) Run(ctx context.Context, e *Engine, k Keys, args ...any) (R, error) {
	var zero R
	var v any
	var err error
	if e.acks.n > 0 && ctx.Value(noAcks{}) == nil {
		v, err = e.runAcked(ctx, s.rs, k.full, args)
	} else {
		v, err = s.rs.Run(ctx, e.client, k.full, args...).Result()
	}
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			e.reloadOnFailure(ctx, err)
			return zero, s.mapError(err)
		}
		v = nil
	}
	r, ok := s.decode(v)
	if !ok {
		return zero, UnexpectedReply(s.name, v)
	}
	return r, nil
}

// Load sends SCRIPT LOAD (to every primary on a Cluster client).
func (s *Script[R]) Load(ctx context.Context, e *Engine) error { return s.rs.Load(ctx, e.client).Err() }

// Reply decoding helpers for decoders. Each reports false for anything
// outside its shape.

// Int reads an integer reply.
func Int(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok
}

// Ints reads an array of exactly n integers.
func Ints(v any, n int) ([]int64, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, x := range a {
		if out[i], ok = x.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// Array reads an array of exactly n elements.
func Array(v any, n int) ([]any, bool) {
	a, ok := v.([]any)
	return a, ok && len(a) == n
}

// Str reads a bulk-string reply.
func Str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// PositiveDecimal reads a positive int64 sent as a decimal string (a
// fencing token beyond 2^53).
func PositiveDecimal(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// Bool01 reads the integer reply 1 (true) or 0 (false).
func Bool01(v any) (bool, bool) {
	switch v {
	case int64(1):
		return true, true
	case int64(0):
		return false, true
	}
	return false, false
}

// Outcome is what an owner-checked release found. Its values equal those
// of coordination.ReleaseOutcome.
type Outcome int

// The release outcomes.
const (
	Released Outcome = iota + 1
	AlreadyReleased
	NotOwned
)

// ReleaseReply reads the release reply 1 (released), 0 (already released)
// or -1 (held by another owner).
func ReleaseReply(v any) (Outcome, bool) {
	switch v {
	case int64(1):
		return Released, true
	case int64(0):
		return AlreadyReleased, true
	case int64(-1):
		return NotOwned, true
	}
	return 0, false
}

// Grant is the decoded reply of an acquire script: acquired, or the time
// until the holder's expiry as the server reported it; Value carries what
// the primitive hands out with the lease (a fencing token).
type Grant struct {
	Acquired bool
	RetryIn  time.Duration // 0: unknown (no expiry)
	Value    string
}

// RetryIn converts a PTTL-like reply in milliseconds into a wait: 0 for no
// expiry (-1) or gone (-2), at least 1 ms otherwise.
func RetryIn(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		return time.Millisecond
	default:
		return time.Duration(ms) * time.Millisecond
	}
}
