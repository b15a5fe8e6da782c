package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
)

func init() {
	register(command{
		name:  "lock run",
		usage: "lock run --key K [--ttl 30s] [--no-wait] -- cmd args      run a command under a kept-alive fenced lock",
		run:   runLockRun,
	})
}

func runLockRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lock run", stdout, stderr, `usage: coordctl lock run --key K [--ttl 30s] [--timeout 0 | --no-wait] [--grace 10s] -- cmd args

Runs cmd while holding the fenced lock K (a distributed flock): it waits for the
lock (without polling), starts cmd with COORD_FENCING_TOKEN (the lock's fencing
token) and COORD_LOCK_KEY in its environment, renews the lock every TTL/3, and
releases it when cmd exits. If renewals fail, cmd gets SIGTERM when what is left
of the lock falls to --grace (at most TTL/4), and SIGKILL when the lock's local
deadline passes, before the lock expires on the server; coordctl exits 75. If the
lock is taken over instead (deleted by hand, lost by the server), cmd gets SIGTERM,
then SIGKILL after --grace, and may overlap the next holder meanwhile: fence its
writes with COORD_FENCING_TOKEN. On SIGINT/SIGTERM coordctl stops cmd the same way
and releases the lock. A release is bounded by what is left of the lease: after a
loss on a stopped server it gives up at once.
cmd and everything it starts never outlive coordctl: if coordctl dies (kill -9
included) they are killed at once (on Linux even those that left cmd's process
group; elsewhere on Unix its process group), and processes cmd leaves running
when it exits get SIGTERM, then SIGKILL after --grace, before the release.

Exit status: cmd's own (128+N when killed by signal N); 1 when --no-wait or
--timeout found the lock held; 75 when the lock was lost while cmd ran (or came
back with too little left to start it: a reply delayed by a stalled server); 127/126
when cmd cannot be found or started (the lock is not taken); 2 on bad usage; 3 when
the server cannot be reached.`, `coordctl lock run --redis redis://127.0.0.1:6379/0 --key nightly-report --ttl 30s -- ./report.sh
coordctl lock run --key nightly-report --no-wait -- ./report.sh   # $COORD_REDIS_URL; exit 1 when held`)
	key := fs.String("key", "", "lock name (keys {K}:lock and {K}:fence); required")
	hf := addHoldFlags(fs, "the lock", "held")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cmdArgs := fs.Args()
	if *key == "" {
		return fs.usagef("--key is required, e.g. --key nightly-report")
	}
	if code := fs.checkKey(*key, "{K}:lock", "{K}:fence"); code != 0 {
		return code
	}
	if code := hf.check(cmdArgs, "./report.sh"); code != 0 {
		return code
	}
	coord, desc, stop, code := connectForCommand(fs, cmdArgs)
	if stop == nil {
		return code
	}
	defer stop()
	logf := timeline(stderr, "lock run")
	sigCtx, stopSignals := notifySignals()
	defer stopSignals()
	leaseKey, fenceKey := fencedKeys(*key, "lock")
	mu, err := fencing.New(coord, leaseKey, fenceKey, fencing.WithHolder(defaultIdentity()))
	if err != nil {
		return fail(fs.stderr, fs.name, err)
	}
	var lk *fencing.Lock
	if *hf.noWait {
		logf("trying lock %q on %s (--no-wait)", *key, desc)
	} else {
		logf("waiting for lock %q on %s", *key, desc)
	}
	err = hf.acquire(sigCtx, func(ctx context.Context, block bool) (err error) {
		if block {
			lk, err = mu.Acquire(ctx, *hf.ttl)
		} else {
			lk, err = mu.TryAcquire(ctx, *hf.ttl)
		}
		return err
	})
	if code, ok := hf.outcome(sigCtx, err, logf, fmt.Sprintf("lock %q is held by someone else", *key)); !ok {
		return code
	}
	lk.KeepAlive()
	logf("acquired lock %q with fencing token %d; starting %s", *key, lk.FencingToken(), shown(cmdArgs[0]))
	return runHolding(lk, "lock", *hf.ttl, cmdArgs, []string{
		"COORD_FENCING_TOKEN=" + strconv.FormatInt(lk.FencingToken(), 10),
		"COORD_LOCK_KEY=" + *key,
	}, *hf.grace, sigCtx, logf, stdout, stderr, "lock run")
}

// holdFlags are the flags of the commands that run a command while holding
// something (lock run, semaphore run).
type holdFlags struct {
	fs                  *cmdFlags
	ttl, timeout, grace *time.Duration
	noWait              *bool
}

// addHoldFlags registers --ttl, --timeout, --no-wait and --grace; what is
// what is held ("the lock"), busy what it is when taken ("held").
func addHoldFlags(fs *cmdFlags, what, busy string) *holdFlags {
	h := &holdFlags{
		fs:      fs,
		ttl:     fs.Duration("ttl", 30*time.Second, "TTL of "+what+", at least 1s: a crashed coordctl's frees itself after this long"),
		timeout: fs.Duration("timeout", 0, "give up waiting for "+what+" after this long (exit 1); 0 waits forever"),
		noWait:  fs.Bool("no-wait", false, "fail at once (exit 1) when "+what+" is "+busy),
		grace:   fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping the command (0: SIGKILL at once)"),
	}
	fs.allowZero("timeout")
	fs.allowZero("grace")
	return h
}

// check checks the command and the hold flags; it returns 0 or the exit
// status (after a one-line usage error).
func (h *holdFlags) check(cmdArgs []string, example string) int {
	switch {
	case len(cmdArgs) == 0:
		return h.fs.usagef("a command is required after --, e.g. -- %s", example)
	case *h.ttl < minRunTTL:
		return h.fs.usagef("--ttl must be at least %v (the command's processes must be gone before the lease can expire when coordctl dies), got %v; e.g. --ttl 30s", minRunTTL, *h.ttl)
	case *h.timeout < 0:
		return h.fs.usagef("--timeout must not be negative; e.g. --timeout 1m")
	case *h.grace < 0:
		return h.fs.usagef("--grace must not be negative; e.g. --grace 10s")
	case *h.noWait && *h.timeout > 0:
		return h.fs.usagef("give --no-wait or --timeout, not both")
	}
	return 0
}

// acquire calls take once without blocking (--no-wait), or blocking until
// --timeout (or forever) or a signal.
func (h *holdFlags) acquire(sigCtx context.Context, take func(ctx context.Context, block bool) error) error {
	if *h.noWait {
		return take(sigCtx, false)
	}
	ctx, cancel := sigCtx, context.CancelFunc(func() {})
	if *h.timeout > 0 {
		ctx, cancel = context.WithTimeout(sigCtx, *h.timeout)
	}
	defer cancel()
	return take(ctx, true)
}

// outcome turns acquire's error into an exit status: ok when acquired;
// 130 when a signal came first; 1 when not acquired (busy is logged);
// else fail's.
func (h *holdFlags) outcome(sigCtx context.Context, err error, logf func(string, ...any), busy string) (int, bool) {
	switch {
	case err == nil:
		return 0, true
	case sigCtx.Err() != nil:
		logf("interrupted while waiting")
		return 130, false
	case errors.Is(err, coordination.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		logf("%s", busy)
		return exitRefused, false
	}
	return fail(h.fs.stderr, h.fs.name, err), false
}

// held is what lock run and semaphore run hold while their command runs:
// a *fencing.Lock or a *semaphore.Permit, kept alive.
type held interface {
	Context() context.Context
	Remaining() time.Duration
	Release(ctx context.Context) (coordination.ReleaseOutcome, error)
}

// runHolding starts cmdArgs (with env added) while h, taken with ttl and
// renewed every ttl/3, is held, and returns the exit status: the
// command's when it exits on its own or is stopped by a signal to
// coordctl (sigCtx); exitLost when h is lost first (the command is then
// stopped: SIGTERM, SIGKILL after grace) or is about to be. What is left
// of h never falls below two thirds of ttl while renewals succeed; when
// it falls to stopAhead(ttl, grace) unrenewed, the command gets SIGTERM,
// and SIGKILL when h's local deadline passes (before the server's
// expiry), so that it does not outlive h by grace. h is released in every
// case, within releaseTimeout of what is left of it.
func runHolding(h held, what string, ttl time.Duration, cmdArgs, env []string, grace time.Duration, sigCtx context.Context,
	logf func(string, ...any), stdout, stderr io.Writer, name string) int {
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout(h.Remaining()))
		defer cancel()
		if out, err := h.Release(ctx); err != nil {
			logf("release failed (the %s ends at its TTL): %v", what, err)
		} else {
			logf("%s %s", what, out)
		}
	}
	ahead := stopAhead(ttl, grace)
	// An acquisition whose reply came late (a waiter on a server that
	// stalled) can return a lease whose local deadline has passed or is
	// about to: the command is not started on it.
	if left := h.Remaining(); h.Context().Err() != nil || left <= ahead {
		logf("%s acquired with %v left (its reply came late); not starting the command", what, max(left, 0).Round(time.Millisecond))
		release()
		logf("exiting 75 (the %s ended before the command could start)", what)
		return exitLost
	}
	c, err := startChild(cmdArgs, env, grace, stdout, stderr, logf)
	if err != nil {
		release()
		fmt.Fprintf(stderr, "coordctl %s: cannot start %s: %v\n", name, shown(cmdArgs[0]), err)
		return exitStatusFor(err)
	}
	// stopFor stops the command with sig (why says why), SIGKILL after g,
	// and releases h.
	stopFor := func(why string, sig os.Signal, g time.Duration) int {
		logf("%s; stopping the command (%v, SIGKILL after %v)", why, signalName(sig), g)
		code := c.stopWith(sig, g)
		logf("command stopped with status %d", code)
		release()
		return code
	}
	early := time.NewTimer(max(h.Remaining()-ahead, 0))
	defer early.Stop()
	for {
		select {
		case <-c.exited():
			code := c.wait()
			logf("command exited with status %d", code)
			release()
			return code
		case <-h.Context().Done():
			// Taken over (a renewal found it gone): SIGTERM, SIGKILL after
			// grace. A lease whose renewals failed never gets here: the
			// early stop below comes first, ahead of its local deadline
			// (and a lease that came back at its end is not started on).
			code := stopFor(fmt.Sprintf("%s lost (%v)", what, context.Cause(h.Context())), syscall.SIGTERM, grace)
			// The command's work was cut short: never report its status, which
			// may be success.
			logf("exiting 75 (lost while running; the command's status was %d)", code)
			return exitLost
		case <-sigCtx.Done():
			sig := receivedSignal(sigCtx)
			return stopFor(signalName(sig)+" received", sig, grace)
		case <-early.C:
			left := h.Remaining()
			if left > ahead {
				early.Reset(left - ahead) // renewed meanwhile
				continue
			}
			left = max(left, 0)
			logf("%s not renewed, %v left; stopping the command before it ends (SIGTERM, SIGKILL after %v)",
				what, left.Round(time.Millisecond), left.Round(time.Millisecond))
			code := c.stopWith(syscall.SIGTERM, left)
			logf("command stopped with status %d", code)
			release()
			logf("exiting 75 (the %s was about to be lost; the command's status was %d)", what, code)
			return exitLost
		}
	}
}

// stopAhead is how much of a lease taken with ttl (renewed every ttl/3)
// may be left, unrenewed, before runHolding stops the command: grace (the
// time between SIGTERM and SIGKILL), at most ttl/4, so that renewals late
// by up to 5/12 of ttl stop nothing.
func stopAhead(ttl, grace time.Duration) time.Duration { return min(grace, ttl/4) }

// signalCause is the cause of a notifySignals context: the signal.
type signalCause struct{ sig os.Signal }

// Error returns the error's message.
func (s signalCause) Error() string { return signalName(s.sig) + " received" }

// notifySignals returns a context cancelled by the first SIGINT or SIGTERM
// to coordctl, with the signal as its cause (see receivedSignal).
func notifySignals() (context.Context, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		select {
		case s := <-ch:
			cancel(signalCause{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// receivedSignal returns the signal that ended a notifySignals context
// (SIGTERM when unknown), to forward to the command.
func receivedSignal(ctx context.Context) os.Signal {
	var sc signalCause
	if errors.As(context.Cause(ctx), &sc) {
		return sc.sig
	}
	return syscall.SIGTERM
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM, nil:
		return "SIGTERM"
	}
	return sig.String()
}

// releaseTimeout bounds a release by what is left of the lease (at least
// 250ms, at most 5s): once the lease has ended on the server, a release
// has nothing left to do, and waiting on a stopped server only delays the
// exit.
func releaseTimeout(remaining time.Duration) time.Duration {
	return min(max(remaining, 250*time.Millisecond), 5*time.Second)
}

// connectForCommand does what lock run, semaphore run and leader run need
// before they contend: it finds the command (127/126: a typo must not take
// a lock, draw a fencing token or win a term), makes a closed stdout or
// stderr (coordctl ... | head) a write error instead of a SIGPIPE death
// that would leave the lock held, and connects (exit 2 or 3). On failure
// stop is nil and code is the exit status.
func connectForCommand(fs *cmdFlags, cmdArgs []string) (coord *coordination.Coordinator, desc string, stop func(), code int) {
	if err := fs.cf.Resolve(); err != nil {
		return nil, "", nil, fail(fs.stderr, fs.name, err)
	}
	if _, _, err := fs.cf.Options(); err != nil {
		return nil, "", nil, fail(fs.stderr, fs.name, err)
	}
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		fmt.Fprintf(fs.stderr, "coordctl %s: cannot start %s: %v\n", fs.name, shown(cmdArgs[0]), err)
		return nil, "", nil, exitStatusFor(err)
	}
	// Notify, not Ignore: an ignored signal stays ignored in the commands
	// coordctl starts, and a handled one is reset to its default there.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	coord, _, desc, stop, code = fs.connectCoord()
	return coord, desc, stop, code
}
