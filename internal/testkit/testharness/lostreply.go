package testharness

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	coordination "github.com/coordkit/coordination"
	"github.com/redis/go-redis/v9"
)

// LostReply is a go-redis hook (add it with AddHook) that, once armed, lets
// the next EVALSHA or EVAL (or command named in Commands) reach the server
// and run, then reports a network timeout to the caller instead of the
// reply, as a reply lost on its way back would. go-redis' own retries
// happen below the hook, so the command runs exactly once. It disarms itself after one use; it is safe for
// concurrent use.
type LostReply struct {
	armed atomic.Bool
	// Commands are the lower-case names of plain commands whose reply is
	// lost too (e.g. "set", the lock's first acquisition attempt); script
	// calls always are.
	Commands []string
}

// Arm makes the next script call lose its reply.
func (d *LostReply) Arm() { d.armed.Store(true) }

// ErrLostReply is the error the caller sees for the lost reply: a
// net.Error whose Timeout() is true, so coordination.IsAmbiguous reports
// true for it.
var ErrLostReply net.Error = lostReplyError{}

type lostReplyError struct{}

// Error, Timeout and Temporary make lostReplyError a net.Error timeout.
func (lostReplyError) Error() string { return "i/o timeout (injected lost reply)" }

// Timeout reports true: the error is a network timeout.
func (lostReplyError) Timeout() bool { return true }

// Temporary reports true, as net.Error timeouts do.
func (lostReplyError) Temporary() bool { return true }

// DialHook implements redis.Hook.
func (d *LostReply) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (d *LostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err // it did not run; go-redis sends EVAL next
		}
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval" || slices.Contains(d.Commands, cmd.Name())) && d.armed.CompareAndSwap(true, false) {
			cmd.SetErr(ErrLostReply)
			return ErrLostReply
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (d *LostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ redis.Hook = (*LostReply)(nil)

// Resend is a go-redis hook (add it with AddHook) that, once armed, sends
// the next command twice, as go-redis does when the first reply is lost
// (the connection broke after the server ran it): the first run's reply is
// thrown away and the caller gets the second's. Between, when set, runs
// between the two sends (other callers' traffic in the gap). Commands
// whose first send answers NOSCRIPT did not run and are passed on
// unchanged (go-redis then sends EVAL, which is doubled instead).
// Subscriptions are never doubled. It disarms itself after one use; it is
// safe for concurrent use.
type Resend struct {
	armed   atomic.Bool
	sha     atomic.Value // string: with ArmScript, the script to double
	sent    atomic.Int32
	name    atomic.Value
	Between func()
}

// Resending returns a coordinator (the backend's prefix) on a fresh
// client of b that carries an unarmed Resend hook, and the hook: a test
// then arms it before the operation whose command is to be re-sent.
func (b *Backend) Resending(t testing.TB) (*coordination.Coordinator, *Resend) {
	t.Helper()
	client := b.Client(t)
	hook := &Resend{}
	client.AddHook(hook)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	return coord, hook
}

// Arm makes the next command be sent twice.
func (r *Resend) Arm() { r.sent.Store(0); r.sha.Store(""); r.armed.Store(true) }

// ArmScript makes the next call of the script whose SHA1 is sha (EVALSHA,
// or EVAL of its body) be sent twice; other commands pass unchanged. Use
// it where other commands of the same client may come first (a keep-alive
// renewal before the release under test).
func (r *Resend) ArmScript(sha string) { r.sent.Store(0); r.sha.Store(sha); r.armed.Store(true) }

// Disarm cancels an Arm that has not fired.
func (r *Resend) Disarm() { r.armed.Store(false) }

// Armed reports whether the hook is still waiting for a command to double.
func (r *Resend) Armed() bool { return r.armed.Load() }

// Sent returns how many times the doubled command was sent (1 while the
// re-send runs, 2 once it has returned) and its lower-case name.
func (r *Resend) Sent() (int, string) {
	n, _ := r.name.Load().(string)
	return int(r.sent.Load()), n
}

// DialHook implements redis.Hook.
func (r *Resend) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r *Resend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.Contains(cmd.Name(), "subscribe") || !r.armed.Load() {
			return next(ctx, cmd)
		}
		if want, _ := r.sha.Load().(string); want != "" {
			if !RunsScript(cmd, want) {
				return next(ctx, cmd)
			}
		}
		if !r.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			r.armed.Store(true) // it did not run: go-redis sends EVAL next
			return err
		}
		r.name.Store(cmd.Name())
		r.sent.Add(1)
		if r.Between != nil {
			r.Between()
		}
		cmd.SetErr(nil)
		err := next(ctx, cmd) // the re-send
		r.sent.Add(1)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (r *Resend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ redis.Hook = (*Resend)(nil)
