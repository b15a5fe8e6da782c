package engine

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/lua"
)

// Script is one embedded Lua script with its strict reply decoder. Every
// script of the library is declared once, by the primitive that runs it
// (in its package, or in its internal/<primitive>core package when another
// package runs it too), next to its decoder. It is immutable and safe for
// concurrent use.
type Script[R any] struct {
	name    string
	src     string
	hash    string
	decode  func(reply any) (R, bool)
	feature string // what the script needs that some servers lack; see Requires
	// sha and body are the SHA1 and the source as command arguments,
	// converted to interfaces once (not on every call).
	sha, body any
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
	sum := sha1.Sum(src)
	hash := hex.EncodeToString(sum[:])
	return &Script[R]{name: name, src: string(src), hash: hash, decode: decode, sha: hash, body: string(src)}
}

// Name returns the script's name, e.g. "lock_acquire".
func (s *Script[R]) Name() string { return s.name }

// Hash returns the script's SHA1 in hex.
func (s *Script[R]) Hash() string { return s.hash }

// Run runs the script as one round trip (EVALSHA, or EVAL after a NOSCRIPT
// reply) on the prefixed keys k and decodes the reply. Error replies are
// mapped by [mapErr] (and, for a script marked with [Script.Requires], a
// command the server lacks to sentinel.ErrUnsupportedServer); a reply the decoder
// does not recognise is an error wrapping [sentinel.ErrBadState]
// ([UnexpectedReply]), never a silent default.
func (s *Script[R]) Run(ctx context.Context, e *Engine, k Keys, args ...any) (R, error) {
	return s.run(ctx, e, k, args)
}

// run is Run with the arguments in parts (id..., the TTL, extra...), laid
// out once in the command: the hot paths build no intermediate argument
// slice.
func (s *Script[R]) run(ctx context.Context, e *Engine, k Keys, parts ...[]any) (R, error) {
	var zero R
	nk := k.Len()
	n := 3 + nk
	for _, p := range parts {
		n += len(p)
	}
	cmdArgs := make([]any, n)
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = "evalsha", s.sha, nk
	k.put(cmdArgs[3:])
	i := 3 + nk
	for _, p := range parts {
		i += copy(cmdArgs[i:], p)
	}
	v, err := e.do(ctx, cmdArgs, scriptKeyPos(nk))
	if err != nil && isNoScript(err) {
		// The server does not have the script (first use, SCRIPT FLUSH, a
		// restart, a failover): send it. go-redis' Script.Run does the same.
		eval := make([]any, len(cmdArgs))
		copy(eval, cmdArgs)
		eval[0], eval[1] = "eval", s.body
		v, err = e.do(ctx, eval, scriptKeyPos(nk))
	}
	if err != nil {
		return zero, k.keyed(s.mapError(err))
	}
	r, ok := s.decode(v)
	if !ok {
		return zero, k.keyed(UnexpectedReply(s.name, v))
	}
	return r, nil
}

func scriptKeyPos(keys int) int8 {
	if keys == 0 {
		return 0
	}
	return 3
}

// do sends one command and returns its reply, with a Redis nil reply as a
// nil value and no error. keyPos is the position of the command's first
// key for Cluster routing (0: go-redis' default for the command).
//
// With replica acknowledgements on ([CheckReplicaAcks]) and outside a
// background cleanup, the command is followed by WAIT in one pipeline
// (runAcked). A failure on the network makes a Cluster client reload its
// slot map (reloadOnFailure).
func (e *Engine) do(ctx context.Context, args []any, keyPos int8) (any, error) {
	var v any
	var err error
	// After Shutdown nothing is sent, except by the background cleanups it
	// lets finish (their contexts carry noAcks).
	if e.life.closed.Load() && ctx.Value(noAcks{}) == nil {
		return nil, errShutdown
	}
	if e.acks.n > 0 && ctx.Value(noAcks{}) == nil {
		v, err = e.runAcked(ctx, args, keyPos)
	} else {
		cmd := redis.NewCmd(ctx, args...)
		if keyPos > 0 {
			cmd.SetFirstKeyPos(keyPos)
		}
		_ = e.client.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		e.reloadOnFailure(ctx, err)
	}
	return v, err
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// Command is one plain Redis command with a strict reply decoder, for a hot
// path that needs no script (the lock's first acquisition attempt is a
// SET NX GET PX). Like a script it is declared once, by its primitive, next
// to its decoder, and sent as one round trip; error replies are mapped by
// [mapErr] (a WRONGTYPE reply matches sentinel.ErrBadState) and a reply the
// decoder does not recognise is an error wrapping [sentinel.ErrBadState]. It is
// immutable and safe for concurrent use.
type Command[R any] struct {
	name     string
	template []any
	keyPos   int8
	decode   func(reply, id any) (R, bool)
	// reject, when set, reports a reply that proves bad state, before
	// decode; rejected is the error Run then returns.
	reject   func(reply, id any) bool
	rejected error
}

// KeyAt and ArgAt are the placeholders of a [Command] template: the i-th
// key, and the i-th argument (in the lease convention: id..., TTL in ms,
// extra...).
type (
	KeyAt int
	ArgAt int
)

// NewCommand returns the command laid out by template: constant arguments
// (the command name first) and [KeyAt]/[ArgAt] placeholders. decode turns
// the reply into R, given the first argument (the caller's id, to
// recognise its own lease after a re-send), and reports false for any reply
// it does not recognise; a nil reply arrives as nil.
func NewCommand[R any](name string, template []any, decode func(reply, id any) (R, bool)) *Command[R] {
	c := &Command[R]{name: name, template: template, decode: decode}
	for i, t := range template {
		if t == KeyAt(0) {
			c.keyPos = int8(i)
		}
	}
	return c
}

// Name returns the command's name, e.g. "lock_try".
func (c *Command[R]) Name() string { return c.name }

// Refusing makes Run fail with an error wrapping [sentinel.ErrBadState] (script code
// COORD_BADSTATE, with detail as its text) for every reply for which bad
// reports true, given the reply and the first argument as for the decoder:
// a reply that proves the key holds what no holder wrote (a command such
// as SET NX GET writes nothing then). It returns c, for use in a
// declaration; call it only at initialisation.
func (c *Command[R]) Refusing(detail string, bad func(reply, id any) bool) *Command[R] {
	c.reject = bad
	c.rejected = &scriptError{code: "COORD_BADSTATE", detail: detail}
	return c
}

// Run sends the command on the prefixed keys k with args and decodes the
// reply.
func (c *Command[R]) Run(ctx context.Context, e *Engine, k Keys, args ...any) (R, error) {
	return c.run(ctx, e, k, args)
}

// run is Run with the arguments in parts, as [Script.run].
func (c *Command[R]) run(ctx context.Context, e *Engine, k Keys, parts ...[]any) (R, error) {
	var zero R
	cmdArgs := make([]any, len(c.template))
	for i, t := range c.template {
		switch t := t.(type) {
		case KeyAt:
			cmdArgs[i] = k.arg(int(t))
		case ArgAt:
			j := int(t)
			for _, p := range parts {
				if j < len(p) {
					cmdArgs[i] = p[j]
					break
				}
				j -= len(p)
			}
		default:
			cmdArgs[i] = t
		}
	}
	v, err := e.do(ctx, cmdArgs, c.keyPos)
	if err != nil {
		return zero, k.keyed(mapErr(err))
	}
	var id any
	if len(parts) > 0 && len(parts[0]) > 0 {
		id = parts[0][0]
	}
	if c.reject != nil && c.reject(v, id) {
		return zero, k.keyed(c.rejected)
	}
	r, ok := c.decode(v, id)
	if !ok {
		return zero, k.keyed(UnexpectedReply(c.name, v))
	}
	return r, nil
}

// Load sends SCRIPT LOAD (to every primary on a Cluster client).
func (s *Script[R]) Load(ctx context.Context, e *Engine) error {
	return e.client.ScriptLoad(ctx, s.src).Err()
}

// Reply decoding helpers for decoders. Each reports false for anything
// outside its shape.

// asInt reads an integer reply.
func asInt(v any) (int64, bool) {
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

// VerifyNow returns the decoder of a verify reply that carries the server
// time: {1, remaining_ms, now} (live; remaining_ms >= 1, or -1 without
// expiry when noExpiry is set, for a kind that has such entries) or
// {0, 0, now} (gone). The semaphore and the read-write lease use it.
func VerifyNow(noExpiry bool) func(v any) (bool, bool) {
	return func(v any) (bool, bool) {
		a, ok := Ints(v, 3)
		if !ok || a[2] <= 0 {
			return false, false
		}
		switch {
		case a[0] == 1 && (a[1] >= 1 || (noExpiry && a[1] == -1)):
			return true, true
		case a[0] == 0 && a[1] == 0:
			return false, true
		}
		return false, false
	}
}

// Outcome is what an owner-checked release found. Its values equal those
// of coordination.ReleaseOutcome.
type Outcome int

// The release outcomes.
const (
	unknownOutcome Outcome = iota // returned with an error
	Released
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
	return unknownOutcome, false
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
		return Scaled(ms, time.Millisecond)
	}
}
