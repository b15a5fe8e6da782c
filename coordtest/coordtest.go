package coordtest

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lua"
)

// ErrInjected is matched (errors.Is) by every error a fault of an [Env]
// causes: a lost reply ([Env.LoseReplies]) and a failed command
// ([Env.FailCommands]), however the library wraps them. A test asserts
// with it that the error it sees is the one it injected, and with
// [coordination.IsAmbiguous] and [coordination.IsTransient] how its code
// should treat it.
var ErrInjected = errors.New("coordtest: injected fault")

// shutdownTimeout bounds the coordinator's Shutdown when the test ends.
const shutdownTimeout = 10 * time.Second

// Env is an in-process Redis (an embedded miniredis, no server to install
// or start), a go-redis client of it and a coordinator over that client,
// with a controllable server clock ([Env.Advance]) and faults injected
// into the client's commands ([Env.LoseReplies], [Env.FailCommands],
// [Env.Pause]). Create it with [New]; the test's end stops it.
//
// An Env is safe for concurrent use by multiple goroutines: faults may be
// armed and the clock moved from the test's goroutine while operations
// run in others.
type Env struct {
	mini   *miniredis.Miniredis
	client *redis.Client
	coord  *coordination.Coordinator

	mu      sync.Mutex
	fail    int           // commands still to fail (FailCommands)
	lose    int           // replies still to lose (LoseReplies)
	paused  int           // Pause calls not resumed yet
	resumed chan struct{} // closed when paused drops to 0
	offset  time.Duration // the server clock's lead over the real clock (Advance)
	last    time.Time     // the server time set last (never moves back)
	ended   bool          // the test ended: no faults, no pauses
}

// New starts an Env for the test t: an embedded server, a client with
// ContextTimeoutEnabled on and MaxRetries -1 (go-redis never re-sends a
// command, so each injected fault reaches the library exactly as
// injected), and a coordinator created by [coordination.New] with opts
// (for example [coordination.WithKeyPrefix]). Every script of the library
// is loaded on the server first, so each operation is one command: the
// EVALSHA of its script, or a plain command where the primitive sends one
// (the lock's first acquisition attempt is a SET).
//
// When t ends (t.Cleanup), faults still armed are dropped, paused commands
// resume, the coordinator is shut down (bounded by 10 s; leases still held
// are not released), the client is closed and the server stopped. New
// fails t (t.Fatalf) when the server does not start or an option is
// invalid. Call it from the test's goroutine.
func New(t testing.TB, opts ...coordination.Option) *Env {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("coordtest: start the embedded server: %v", err)
	}
	e := &Env{mini: m, last: time.Now()}
	m.SetTime(e.last)
	m.ClockTTL(true)
	e.client = redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	e.client.AddHook(hook{e})
	stop := func() {
		_ = e.client.Close()
		m.Close()
	}
	if err := e.loadScripts(); err != nil {
		stop()
		t.Fatalf("coordtest: load the library's scripts: %v", err)
	}
	coord, err := coordination.New(e.client, opts...)
	if err != nil {
		stop()
		t.Fatalf("coordtest: %v", err)
	}
	e.coord = coord
	t.Cleanup(func() {
		e.mu.Lock()
		e.ended, e.fail, e.lose = true, 0, 0
		if e.paused > 0 {
			e.paused = 0
			close(e.resumed)
		}
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := coord.Shutdown(ctx); err != nil {
			t.Logf("coordtest: shut down the coordinator: %v", err)
		}
		stop()
	})
	return e
}

// loadScripts loads every script of package lua (SCRIPT LOAD), so that no
// operation meets a NOSCRIPT reply and sends its script a second time.
func (e *Env) loadScripts() error {
	ctx := context.Background()
	for _, name := range lua.Names() {
		src, err := fs.ReadFile(lua.FS(), name+".lua")
		if err != nil {
			return err
		}
		if err := e.client.ScriptLoad(ctx, string(src)).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Coordinator returns the Env's coordinator, to pass to the primitives
// (lock.New, semaphore.New, ratelimit.New ...). Do not shut it down: the
// test's end does.
func (e *Env) Coordinator() *coordination.Coordinator { return e.coord }

// Client returns the Env's go-redis client, the coordinator's own, for the
// test's reads and writes of the server (GET, PTTL, ZRANGE ... of a key;
// with the coordinator's key prefix, which the primitives add and this
// client does not). Its commands go through the same faults and clock as
// the coordinator's, and count in the faults' numbers. Do not close it:
// the test's end does.
func (e *Env) Client() redis.UniversalClient { return e.client }

// Advance moves the server's clock forward by d, at once: TIME, which
// every script reads, and the TTLs of every key and hash field move
// together, so by the next command a lease with less than d left has
// expired, a rate-limit window with less than d left has ended and a
// token bucket has refilled for d. Between jumps the server's clock runs
// with the real clock (ahead of it by the sum of every d so far), so
// waits and short TTLs behave as on a real server.
//
// Advance does not move the process's clock. What the library measures
// locally keeps real time: a held lease's Remaining, its Context's
// deadline and its keep-alive schedule, the timers of a blocked Acquire,
// latch Wait or limiter Wait, and every context deadline. So after
// Advance past a lease's TTL its handle still reports the lease held
// until it asks the server: Refresh and Verify return false and cancel
// the lease's Context with a cause matching [coordination.ErrLost], and a
// KeepAlive finds it lost at its next renewal (a third of the TTL, real
// time, after the last). A call already waiting when Advance is called
// sees the new time at its next attempt (its wait was computed from the
// server's times before the jump).
//
// d must not be negative (Advance panics): the clock never moves back. It
// is safe to call while operations run.
func (e *Env) Advance(d time.Duration) {
	if d < 0 {
		panic("coordtest: Advance: negative duration " + d.String())
	}
	e.mu.Lock()
	e.offset += d
	e.tickLocked()
	e.mu.Unlock()
}

// tickLocked sets the server's time to the real time plus the offset,
// never earlier than the last time set (concurrent commands read the real
// clock in any order). Called with mu held.
func (e *Env) tickLocked() {
	now := time.Now().Add(e.offset)
	if now.Before(e.last) {
		now = e.last
	}
	e.last = now
	e.mini.SetTime(now)
}

// LoseReplies makes the next n commands of the client run on the server
// and then lose their replies: each caller gets an error matching
// [ErrInjected] that [coordination.IsAmbiguous] and
// [coordination.IsTransient] report true for (an i/o timeout), although
// the command took effect. That is the ambiguous outcome a timeout or a
// broken connection gives on a real server: an acquisition that fails so
// held the lease on the server, and the library undoes it in the
// background (an owner-checked release, sent through the same client) so
// the caller holds nothing; a rate-limit decision that fails so consumed
// its permits.
//
// Calls add up: LoseReplies(1) twice loses two replies. A command counts
// once whatever it is (an operation's script, a background renewal or
// cleanup, a command of the test's own through [Env.Client]); a pipeline
// counts as one command and loses every reply. The handshake of a new
// connection does not count. A command failed by [Env.FailCommands] never
// reached the server and does not count. n must not be negative (LoseReplies
// panics).
func (e *Env) LoseReplies(n int) { e.arm("LoseReplies", &e.lose, n) }

// FailCommands makes the next n commands of the client fail before they
// reach the server, as a refused connection does: each caller gets an
// error matching [ErrInjected] (and syscall.ECONNREFUSED, in a
// *net.OpError of a dial) that [coordination.IsTransient] reports true for
// and [coordination.IsAmbiguous] false: the command provably did not run,
// so trying again later is safe and nothing was written.
//
// Calls add up, and commands are counted as by [Env.LoseReplies]; failed
// commands are taken first (a command that fails does not lose a reply).
// n must not be negative (FailCommands panics).
func (e *Env) FailCommands(n int) { e.arm("FailCommands", &e.fail, n) }

// arm adds n to the count of a fault (guarded by mu), which the method
// named verb arms; nothing once the test ended.
func (e *Env) arm(verb string, count *int, n int) {
	if n < 0 {
		panic("coordtest: " + verb + ": negative count " + strconv.Itoa(n))
	}
	e.mu.Lock()
	if !e.ended {
		*count += n
	}
	e.mu.Unlock()
}

// Pause holds every command of the client before it is sent, until resume
// is called or the command's context ends; a command whose context ends
// while held returns the context's error without reaching the server
// (which [coordination.IsAmbiguous] reports true for, as for every
// cancelled call: the library cannot tell a held command from one sent, and
// undoes an acquisition cancelled so in the background, as for a lost
// reply). This is a server that stopped answering, seen
// from the client: calls block, deadlines expire, keep-alive renewals do
// not arrive while the server's clock runs on.
//
// Only commands are held. The coordinator's Pub/Sub connection, which
// carries release notifications to blocked waiters, is not: a
// notification of a release that ran before Pause is delivered, and the
// woken waiter's next attempt is held like any command. Keys go on
// expiring on the server clock, seen at the first command after resume.
//
// Pauses nest: commands resume when every Pause's resume has been called.
// resume is safe to call more than once and from any goroutine; the end
// of the test resumes everything.
func (e *Env) Pause() (resume func()) {
	e.mu.Lock()
	if !e.ended {
		if e.paused == 0 {
			e.resumed = make(chan struct{})
		}
		e.paused++
	}
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.paused == 0 { // the test ended
				return
			}
			e.paused--
			if e.paused == 0 {
				close(e.resumed)
			}
		})
	}
}

// admit is what a command meets before it is sent: the pause, then a
// failure or a lost reply when one is armed; it sets the server's clock.
// lose reports that the command's reply is to be lost once it ran; err is
// the error that ends the command unsent.
func (e *Env) admit(ctx context.Context) (lose bool, err error) {
	e.mu.Lock()
	for e.paused > 0 {
		ch := e.resumed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	if e.fail > 0 {
		e.fail--
		return false, refused()
	}
	if e.lose > 0 {
		e.lose--
		lose = true
	}
	e.tickLocked()
	return lose, nil
}

// injected is the cause of an injected fault: it reads as msg, matches
// [ErrInjected] and wraps cause.
type injected struct {
	msg   string
	cause error
}

// Error returns "coordtest: injected fault: " and the fault's message.
func (e *injected) Error() string { return "coordtest: injected fault: " + e.msg }

// Is reports whether target is [ErrInjected].
func (e *injected) Is(target error) bool { return target == ErrInjected }

// Unwrap returns the error the fault stands for (nil for a lost reply).
func (e *injected) Unwrap() error { return e.cause }

// lostReply is the error of a command whose reply was lost: an i/o
// timeout (a net.Error), as a read deadline gives.
type lostReply struct{ injected }

// Timeout reports true: a lost reply reads as a read deadline's timeout.
func (*lostReply) Timeout() bool { return true }

// Temporary reports true, as net.Error's timeouts do.
func (*lostReply) Temporary() bool { return true }

func lost() error {
	return &lostReply{injected{msg: "reply lost (i/o timeout)"}}
}

// refused is the error of a command failed before it was sent: a dial
// refused, which the library knows wrote nothing.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &injected{msg: "connection refused", cause: syscall.ECONNREFUSED}}
}

// hook injects the Env's faults into the client's commands and sets the
// server's clock before each.
type hook struct{ e *Env }

// DialHook hands dials on unchanged.
func (hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook injects faults into one command.
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if handshake(cmd) {
			return next(ctx, cmd)
		}
		lose, err := h.e.admit(ctx)
		if err != nil {
			return err
		}
		err = next(ctx, cmd)
		if lose {
			err = lost()
			cmd.SetErr(err)
		}
		return err
	}
}

// ProcessPipelineHook injects faults into a pipeline, as into one command.
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		setup := true
		for _, c := range cmds {
			setup = setup && handshake(c)
		}
		if setup {
			return next(ctx, cmds)
		}
		lose, err := h.e.admit(ctx)
		if err == nil {
			err = next(ctx, cmds)
			if !lose {
				return err
			}
			err = lost()
		}
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

// handshake reports whether cmd is one of the commands go-redis sends when
// it opens a connection (through the client's hooks), which faults leave
// alone.
func handshake(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "auth", "select":
		return true
	case "client":
		args := cmd.Args()
		if len(args) > 1 {
			if s, ok := args[1].(string); ok {
				switch strings.ToLower(s) {
				case "setinfo", "setname", "tracking", "maint_notifications":
					return true
				}
			}
		}
	}
	return false
}
