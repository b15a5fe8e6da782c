package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A command the engine sends knows how often go-redis wrote it to a
// connection: one of its constant arguments (a script's SHA1 or body, a
// command's first constant word after its name) is sent as a [wireMark],
// whose MarshalBinary, which go-redis' protocol writer calls once per
// write, counts. That count is what the library knows about re-sends
// without writing anything on the server:
//
//   - 0 writes: nothing reached a server, whatever the error
//     (a failed dial, a pool timeout, a context that ended first); the
//     error is wrapped so that [IsAmbiguous] reports false.
//   - 2 writes or more: go-redis re-sent the command after its first write
//     (a lost reply, a reset connection), so the first may have run: a
//     release then reports what its first send did from the handle's own
//     state (see kindBackend.Release) instead of a mark on the server.
//   - A command sent [once] (a consumptive decision: a rate-limit grant) is
//     never re-sent by go-redis once written (its NoRetry is true); the
//     engine itself sends it again only when the previous attempt provably
//     did not run (0 writes: a refused dial, a pool timeout; an error reply
//     is no proof, a proxy may send one for a command the server ran),
//     with go-redis' backoff
//     and at most MaxRetries times. A write whose reply was lost is then an
//     ambiguous error for the caller, never a second grant.
//
// The count is exact for go-redis' own client, Cluster client and
// pipelines; a client with auto-pipelining may marshal an argument once
// more to size its batch, which only makes an unsent command look sent (an
// ambiguous error where an unambiguous one was possible: never a double
// run). A write answered by an error reply that ran nothing (a Cluster
// redirect, MOVED or ASK, followed by go-redis) counts too: a release
// redirected while its slot moves, whose second write finds the lease
// gone, reports Released when the lease was held locally; the lease was
// then either released by nobody and lost with no holder to tell (expired
// early, deleted by hand), or released: either way no one holds it.

// wireMark is the counted argument of one command: b is written, s is what
// String shows (hooks and logs that print the command), n counts writes.
type wireMark struct {
	b []byte
	s string
	n atomic.Int32
}

// MarshalBinary is called by go-redis' protocol writer once per write of
// the command.
func (m *wireMark) MarshalBinary() ([]byte, error) {
	m.n.Add(1)
	return m.b, nil
}

// String is the argument as the command's text shows it.
func (m *wireMark) String() string { return m.s }

// inlineArgs is how many arguments a command carries in its own
// allocation (every hot path's command fits: a rate-limit decision has 7
// arguments, a composite of three limits 10); a longer command's
// arguments get a slice of their own.
const inlineArgs = 10

// cmdArgs is what the engine adds to one go-redis command, in one
// allocation: the counted argument and the command's own copy of its
// arguments (go-redis keeps the command, a hook may too, so nothing of it
// is ever reused).
type cmdArgs struct {
	mark wireMark
	buf  [inlineArgs]any
}

// place copies args into a's buffer (or a new slice when they do not
// fit), with a's counted argument, holding w, at w.at, and returns the
// copy. args itself is left as it was (reusable for an EVAL after
// NOSCRIPT, or a send again).
func (a *cmdArgs) place(args []any, w wire) []any {
	out := a.buf[:0]
	if len(args) > len(a.buf) {
		out = make([]any, 0, len(args))
	}
	out = append(out, args...)
	a.mark.b, a.mark.s = w.b, w.s
	out[w.at] = &a.mark
	return out
}

// sendCmd is a go-redis command with a counted argument; once makes
// go-redis send it at most once after a write (its retry loop asks
// NoRetry, which a pre-write failure bypasses). The command, its counted
// argument and its arguments are one allocation: the go-redis command is
// held by value, set once from its constructor's fresh (stack-allocated)
// value before anything else sees it, so the engine's command costs what
// go-redis' own does.
type sendCmd struct {
	redis.Cmd
	cmdArgs
	once bool
}

// NoRetry reports whether go-redis may re-send the command after writing
// it: never for a command sent once.
func (c *sendCmd) NoRetry() bool { return c.once }

// wire is a constant argument of a script or command, at position at of
// its arguments, prepared once as the bytes a [wireMark] writes.
type wire struct {
	at int
	b  []byte
	s  string
}

func newWire(at int, s string) wire { return wire{at: at, b: []byte(s), s: s} }

// rawSendCmd is sendCmd reading its reply as raw RESP: go-redis then
// turns neither a nil nor an error reply into an error, which spares the
// 20-odd allocations its retry classifier spends on every redis.Nil (see
// [readRaw]).
type rawSendCmd struct {
	redis.RawCmd
	cmdArgs
	once bool
}

// NoRetry is sendCmd's.
func (c *rawSendCmd) NoRetry() bool { return c.once }

// sendOpts are how one command is sent.
type sendOpts struct {
	keyPos int8 // the first key's position (0: go-redis' default)
	mark   wire // the counted argument
	once   bool // consumptive: never re-sent once it may have run
	// raw reads the reply as raw RESP first (a command whose usual reply
	// is a nil or a string: the lock's SET NX GET); a reply readRaw does
	// not take (an error reply: WRONGTYPE, MOVED, LOADING, ...; none of
	// them ran the command) is asked again the usual way, so that go-redis
	// follows redirects and retries as for any command.
	raw bool
}

// sent is what the engine learnt about one command it sent: how many times
// go-redis wrote it.
type sent struct{ writes int32 }

// resent reports whether go-redis wrote the command more than once: an
// earlier write may have run although its reply was lost.
func (s sent) resent() bool { return s.writes > 1 }

// send sends args as o says, and for a command sent once retries what
// provably did not run ([notRun]) as go-redis would have: at most
// MaxRetries more times, with its backoff. A Redis nil reply is a nil value
// and no error.
func (e *Engine) send(ctx context.Context, args []any, o sendOpts) (any, sent, error) {
	// After Shutdown nothing is sent, except by the background cleanups it
	// lets finish (their contexts carry noAcks).
	if e.life.closed.Load() && ctx.Value(noAcks{}) == nil {
		return nil, sent{}, errShutdown
	}
	for attempt := 0; ; attempt++ {
		v, s, err := e.sendOne(ctx, args, o)
		if err == nil || !o.once || attempt >= e.retry.max || !notRun(err, s) {
			return v, s, err
		}
		d := e.retry.backoff(attempt + 1)
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return v, s, err
			}
		}
	}
}

// sendOne is one go-redis Process of args (go-redis' own re-sends
// included, unless o.once).
func (e *Engine) sendOne(ctx context.Context, args []any, o sendOpts) (any, sent, error) {
	if o.raw && e.acks.n == 0 {
		v, s, ok, err := e.sendRaw(ctx, args, o)
		if ok || err != nil {
			return v, s, err
		}
		// An error reply: nothing ran; ask again the usual way.
		v, s2, err := e.sendOne(ctx, args, sendOpts{keyPos: o.keyPos, mark: o.mark, once: o.once})
		s.writes += s2.writes
		return v, s, err
	}
	cmd := &sendCmd{once: o.once}
	cmd.Cmd = *redis.NewCmd(ctx, cmd.place(args, o.mark)...)
	if o.keyPos > 0 {
		cmd.SetFirstKeyPos(o.keyPos)
	}
	var v any
	var err error
	if e.acks.n > 0 && ctx.Value(noAcks{}) == nil {
		v, err = e.runAcked(ctx, cmd, o.keyPos)
	} else {
		_ = e.client.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	s := sent{writes: cmd.mark.n.Load()}
	if err == redis.Nil {
		return nil, s, nil
	}
	if err != nil {
		e.reloadOnFailure(ctx, err)
	}
	return v, s, err
}

// notRun reports whether the command that ended with err provably did not
// run: nothing was written and the error is transient. An error reply is
// no proof: a proxy between the client and the server may send LOADING
// or BUSY in place of the reply of a command the server ran (the history
// tests inject exactly that), so a written command is never sent again.
func notRun(err error, s sent) bool {
	return s.writes == 0 && Classify(err) == Transient
}

// retryPolicy is the client's retry budget and backoff, which the engine
// applies to the commands it re-sends itself.
type retryPolicy struct {
	max      int
	min, cap time.Duration
}

// clientRetry reads client's MaxRetries and backoff (go-redis' defaults for
// a client type it does not know).
func clientRetry(c redis.UniversalClient) retryPolicy {
	switch v := c.(type) {
	case *redis.Client:
		o := v.Options()
		return retryPolicy{max: o.MaxRetries, min: o.MinRetryBackoff, cap: o.MaxRetryBackoff}
	case *redis.ClusterClient:
		o := v.Options()
		return retryPolicy{max: o.MaxRetries, min: o.MinRetryBackoff, cap: o.MaxRetryBackoff}
	case *redis.Ring:
		o := v.Options()
		return retryPolicy{max: o.MaxRetries, min: o.MinRetryBackoff, cap: o.MaxRetryBackoff}
	}
	return retryPolicy{max: 3, min: 8 * time.Millisecond, cap: 512 * time.Millisecond}
}

// backoff is go-redis' exponential backoff with jitter before retry
// number attempt (1 the first).
func (p retryPolicy) backoff(attempt int) time.Duration {
	if p.min <= 0 {
		return 0
	}
	d := p.min << uint(attempt)
	if d < p.min || d > p.cap {
		d = p.cap
	}
	d = p.min + rand.N(d)
	if d > p.cap {
		d = p.cap
	}
	return d
}

// sendRaw sends args as a rawSendCmd; ok reports a reply readRaw took (a
// nil, a simple or bulk string, an integer), false an error reply.
func (e *Engine) sendRaw(ctx context.Context, args []any, o sendOpts) (any, sent, bool, error) {
	cmd := &rawSendCmd{once: o.once}
	cmd.RawCmd = *redis.NewRawCmd(ctx, cmd.place(args, o.mark)...)
	if o.keyPos > 0 {
		cmd.SetFirstKeyPos(o.keyPos)
	}
	_ = e.client.Process(ctx, cmd)
	b, err := cmd.Result()
	s := sent{writes: cmd.mark.n.Load()}
	if err != nil {
		e.reloadOnFailure(ctx, err)
		return nil, s, false, err
	}
	v, ok := readRaw(b)
	return v, s, ok, nil
}

// readRaw reads one RESP2 or RESP3 reply of these shapes: a null (nil), a
// simple or bulk string (a string), an integer (an int64). Anything else,
// error replies included, is not taken (false).
func readRaw(b []byte) (any, bool) {
	n := len(b)
	if n < 3 || b[n-2] != '\r' || b[n-1] != '\n' {
		return nil, false
	}
	body := b[1 : n-2]
	switch b[0] {
	case '_':
		return nil, n == 3
	case '+':
		return string(body), true
	case ':':
		i, err := strconv.ParseInt(string(body), 10, 64)
		return i, err == nil
	case '$':
		nl := bytes.IndexByte(body, '\r')
		if nl < 0 {
			return nil, string(body) == "-1"
		}
		size, err := strconv.Atoi(string(body[:nl]))
		if err != nil || size < 0 || nl+2+size != len(body) || body[nl+1] != '\n' {
			return nil, false
		}
		return string(body[nl+2:]), true
	}
	return nil, false
}
