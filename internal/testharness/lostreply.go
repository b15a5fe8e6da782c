package testharness

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"

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
