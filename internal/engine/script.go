package engine

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/decode"
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
	feature string         // what the script needs that some servers lack; see Requires
	errKey  map[string]int // codes whose errors name another key; see ErrorsOn
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

// ErrorsOn marks the script's error codes (COORD_..., e.g. a counter's
// COORD_BADCOUNTER) as errors about its key i (0 the first), the key
// Run's error then names, and returns s. Call it only at initialisation.
func (s *Script[R]) ErrorsOn(i int, codes ...string) *Script[R] {
	if s.errKey == nil {
		s.errKey = make(map[string]int, len(codes))
	}
	for _, c := range codes {
		s.errKey[c] = i
	}
	return s
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
// ([decode.Unexpected]), never a silent default.
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
		err = s.mapError(err)
		if i, ok := s.errKey[codeOf(err)]; ok && i < k.Len() && k.named {
			k = e.Key(strings.TrimPrefix(k.Full()[i], e.prefix))
		}
		return zero, k.keyed(err)
	}
	r, ok := s.decode(v)
	if !ok {
		return zero, k.keyed(decode.Unexpected(s.name, v))
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
		return zero, k.keyed(decode.Unexpected(c.name, v))
	}
	return r, nil
}

// Load sends SCRIPT LOAD (to every primary on a Cluster client).
func (s *Script[R]) Load(ctx context.Context, e *Engine) error {
	return e.client.ScriptLoad(ctx, s.src).Err()
}
