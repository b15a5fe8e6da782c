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
	// converted to interfaces once (not on every call), and as counted
	// arguments (see send.go).
	sha, body   any
	shaW, bodyW wire
	// once: a consumptive script, sent at most once (see [Script.Once]).
	once bool
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
	return newScript(name, string(src), decode)
}

// newScript is NewScript for the source src.
func newScript[R any](name, src string, decode func(reply any) (R, bool)) *Script[R] {
	sum := sha1.Sum([]byte(src))
	hash := hex.EncodeToString(sum[:])
	return &Script[R]{name: name, src: src, hash: hash, decode: decode, sha: hash, body: src,
		shaW: newWire(1, hash), bodyW: newWire(1, src)}
}

// Once marks the script as consumptive (a rate-limit decision: running it
// twice would consume twice) and returns s: the engine never lets go-redis
// re-send it once a write may have reached the server, and sends it again
// itself only when the previous attempt provably did not run (see
// send.go). A reply lost after the write is then an error for which
// [IsAmbiguous] reports true, never a second run. Call it only at
// initialisation.
func (s *Script[R]) Once() *Script[R] {
	s.once = true
	return s
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
	r, _, err := s.runSent(ctx, e, k, parts...)
	return r, err
}

// runSent is run, also returning what the engine learnt about the sends
// (whether go-redis re-sent the script after a write).
func (s *Script[R]) runSent(ctx context.Context, e *Engine, k Keys, parts ...[]any) (R, sent, error) {
	var zero R
	nk := k.size()
	n := 3 + nk
	for _, p := range parts {
		n += len(p)
	}
	// The arguments are laid out on the stack: the command the engine
	// sends gets its own copy (see cmdArgs.place).
	var buf [inlineArgs]any
	cmdArgs := buf[:]
	if n > len(buf) {
		cmdArgs = make([]any, n)
	}
	cmdArgs = cmdArgs[:n]
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = "evalsha", s.sha, nk
	k.put(cmdArgs[3:])
	i := 3 + nk
	for _, p := range parts {
		i += copy(cmdArgs[i:], p)
	}
	v, st, err := e.send(ctx, cmdArgs, sendOpts{keyPos: scriptKeyPos(nk), mark: s.shaW, once: s.once})
	if err != nil && isNoScript(err) {
		// The server does not have the script (first use, SCRIPT FLUSH, a
		// restart, a failover): send it. go-redis' Script.Run does the same.
		// NOSCRIPT ran nothing, so this is the first run either way.
		cmdArgs[0], cmdArgs[1] = "eval", s.body
		var st2 sent
		v, st2, err = e.send(ctx, cmdArgs, sendOpts{keyPos: scriptKeyPos(nk), mark: s.bodyW, once: s.once})
		st.writes += st2.writes - 1
	}
	if err != nil {
		err = s.mapError(err)
		if i, ok := s.errKey[codeOf(err)]; ok && i < k.size() && k.named {
			k = e.Key(strings.TrimPrefix(k.Full()[i], e.prefix))
		}
		return zero, st, k.keyed(err)
	}
	r, ok := s.decode(v)
	if !ok {
		return zero, st, k.keyed(decode.Unexpected(s.name, v))
	}
	return r, st, nil
}

func scriptKeyPos(keys int) int8 {
	if keys == 0 {
		return 0
	}
	return 3
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// Command is one plain Redis command with a strict reply decoder, for a hot
// path that needs no script (the lock's first acquisition attempt is a
// SET NX PX). Like a script it is declared once, by its primitive, next to
// its decoder, and sent as one round trip; error replies are mapped by
// [mapErr] (a WRONGTYPE reply matches sentinel.ErrBadState) and a reply the
// decoder does not recognise is an error wrapping [sentinel.ErrBadState].
// It is immutable and safe for concurrent use.
type Command[R any] struct {
	name     string
	template []any
	keyPos   int8
	mark     wire // its first constant argument after the name, counted
	decode   func(reply, id any) (R, bool)
	// reject, when set, reports a reply that proves bad state, before
	// decode; rejected is the error run then returns.
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
// (the command name first, and at least one more constant string: the
// argument whose writes are counted, see send.go) and [KeyAt]/[ArgAt]
// placeholders. decode turns the reply into R, given the first argument
// (the caller's id, to recognise its own lease after a re-send), and
// reports false for any reply it does not recognise; a nil reply arrives
// as nil. The reply is read as raw RESP (see sendOpts.raw): a nil, a
// string or an integer. A template without a second constant string
// panics at initialisation.
func NewCommand[R any](name string, template []any, decode func(reply, id any) (R, bool)) *Command[R] {
	c := &Command[R]{name: name, template: template, decode: decode, mark: wire{at: -1}}
	for i, t := range template {
		if t == KeyAt(0) {
			c.keyPos = int8(i)
		}
		if s, ok := t.(string); ok && i > 0 && c.mark.at < 0 {
			c.mark = newWire(i, s)
		}
	}
	if c.mark.at < 0 {
		panic("engine: command " + name + " has no constant argument after its name")
	}
	return c
}

// Refusing makes run fail with an error wrapping [sentinel.ErrBadState]
// (script code COORD_BADSTATE, with detail as its text) for every reply for
// which bad reports true, given the reply and the first argument as for
// the decoder: a reply that proves the key holds what no holder wrote (a
// command such as SET NX GET writes nothing then). It returns c, for use
// in a declaration; call it only at initialisation.
func (c *Command[R]) Refusing(detail string, bad func(reply, id any) bool) *Command[R] {
	c.reject = bad
	c.rejected = &scriptError{code: "COORD_BADSTATE", detail: detail}
	return c
}

// Run is run for tests and tools: it sends the command on the prefixed
// keys k with args and decodes the reply.
func (c *Command[R]) Run(ctx context.Context, e *Engine, k Keys, args ...any) (R, error) {
	r, _, err := c.run(ctx, e, k, args)
	return r, err
}

// run sends the command on the prefixed keys k with the arguments in parts
// (id..., the TTL, extra..., as [Script.run]) and decodes the reply; it
// also returns what the engine learnt about the sends.
func (c *Command[R]) run(ctx context.Context, e *Engine, k Keys, parts ...[]any) (R, sent, error) {
	var zero R
	var buf [inlineArgs]any
	cmdArgs := buf[:]
	if len(c.template) > len(buf) {
		cmdArgs = make([]any, len(c.template))
	}
	cmdArgs = cmdArgs[:len(c.template)]
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
	v, st, err := e.send(ctx, cmdArgs, sendOpts{keyPos: c.keyPos, mark: c.mark, raw: true})
	if err != nil {
		return zero, st, k.keyed(mapErr(err))
	}
	var id any
	if len(parts) > 0 && len(parts[0]) > 0 {
		id = parts[0][0]
	}
	if c.reject != nil && c.reject(v, id) {
		return zero, st, k.keyed(c.rejected)
	}
	r, ok := c.decode(v, id)
	if !ok {
		return zero, st, k.keyed(decode.Unexpected(c.name, v))
	}
	return r, st, nil
}

// Load sends SCRIPT LOAD (to every primary on a Cluster client).
func (s *Script[R]) Load(ctx context.Context, e *Engine) error {
	return e.client.ScriptLoad(ctx, s.src).Err()
}
