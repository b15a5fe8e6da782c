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

// exitNotAcquired is lock run's exit status when --no-wait or --timeout
// gives up because someone else holds the lock (EX_TEMPFAIL of sysexits.h).
const exitNotAcquired = 75

func init() {
	register(command{
		name:  "lock run",
		usage: "lock run --key K [--ttl 30s] [--no-wait] -- cmd args  run a command under a kept-alive fenced lock",
		run:   runLockRun,
	})
}

func runLockRun(args []string, stdout, stderr io.Writer) int {
	fs, cf := subcommandFlags("lock run", stderr, `usage: coordctl lock run --key K [--ttl 30s] [--timeout 0 | --no-wait] [--grace 10s] -- cmd args

Runs cmd while holding the fenced lock K (a distributed flock): it waits for the
lock (without polling), starts cmd with COORD_FENCING_TOKEN (the lock's fencing
token) and COORD_LOCK_KEY in its environment, renews the lock every TTL/3, and
releases it when cmd exits. If the lock is lost (renewals fail until its local
deadline, or it was taken over), cmd gets SIGTERM, then SIGKILL after --grace.
On SIGINT/SIGTERM coordctl stops cmd the same way and releases the lock.

Exit status: cmd's own (128+N when killed by signal N); 75 when --no-wait or
--timeout found the lock held, or when the lock was lost and cmd then exited 0;
127/126 when cmd cannot be found or started (the lock is not taken); 1 on other
errors; 2 on bad usage.`)
	key := fs.String("key", "", "lock name (keys {K}:lock and {K}:fence); required")
	ttl := fs.Duration("ttl", 30*time.Second, "lock TTL: a crashed coordctl's lock frees itself after this long")
	timeout := fs.Duration("timeout", 0, "give up waiting for the lock after this long (exit 75); 0 waits forever")
	noWait := fs.Bool("no-wait", false, "fail at once (exit 75) when the lock is held")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping the command")
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	cmdArgs := fs.Args()
	switch {
	case *key == "" || len(cmdArgs) == 0:
		fmt.Fprintln(stderr, "coordctl lock run: --key and a command (after --) are required")
		fs.Usage()
		return 2
	case *ttl < 10*time.Millisecond:
		fmt.Fprintf(stderr, "coordctl lock run: --ttl must be at least 10ms, got %v\n", *ttl)
		return 2
	case *timeout < 0 || *grace < 0:
		fmt.Fprintln(stderr, "coordctl lock run: --timeout and --grace must not be negative")
		return 2
	case *noWait && *timeout > 0:
		fmt.Fprintln(stderr, "coordctl lock run: give --no-wait or --timeout, not both")
		return 2
	}
	coord, desc, stop, code := connectForCommand("lock run", cf, cmdArgs, stderr)
	if stop == nil {
		return code
	}
	defer stop()
	logf := timeline(stderr, "lock run")

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	leaseKey, fenceKey := fencedKeys(*key, "lock")
	var (
		lk  *fencing.Lock
		err error
	)
	if *noWait {
		lk, err = fencing.TryAcquire(sigCtx, coord, leaseKey, fenceKey, *ttl, fencing.WithHolder(defaultIdentity()))
	} else {
		wctx, cancel := sigCtx, context.CancelFunc(func() {})
		if *timeout > 0 {
			wctx, cancel = context.WithTimeout(sigCtx, *timeout)
		}
		logf("waiting for lock %q on %s", *key, desc)
		lk, err = fencing.Acquire(wctx, coord, leaseKey, fenceKey, *ttl, fencing.WithHolder(defaultIdentity()))
		cancel()
	}
	switch {
	case err == nil:
	case sigCtx.Err() != nil:
		logf("interrupted while waiting for the lock")
		return 130
	case errors.Is(err, coordination.ErrNotAcquired):
		logf("lock %q is held by someone else", *key)
		return exitNotAcquired
	default:
		fmt.Fprintf(stderr, "coordctl lock run: %v\n", err)
		return 1
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if out, err := lk.Release(ctx); err != nil {
			logf("release failed (the lock ends at its TTL): %v", err)
		} else {
			logf("lock %s", out)
		}
	}
	lk.KeepAlive()
	logf("acquired lock %q with fencing token %d; starting %s", *key, lk.FencingToken(), cmdArgs[0])
	c, err := startChild(cmdArgs, []string{
		"COORD_FENCING_TOKEN=" + strconv.FormatInt(lk.FencingToken(), 10),
		"COORD_LOCK_KEY=" + *key,
	}, stdout, stderr)
	if err != nil {
		release()
		fmt.Fprintf(stderr, "coordctl lock run: cannot start %s: %v\n", cmdArgs[0], err)
		return exitStatusFor(err)
	}
	// stopFor stops the command (why says why) and releases the lock.
	stopFor := func(why string) int {
		logf("%s; stopping the command (SIGTERM, SIGKILL after %v)", why, *grace)
		code := c.stop(*grace)
		logf("command stopped with status %d", code)
		release()
		return code
	}
	select {
	case <-c.exited():
		code := c.wait()
		logf("command exited with status %d", code)
		release()
		return code
	case <-lk.Done():
		code := stopFor(fmt.Sprintf("lock lost (%v)", context.Cause(lk.Context())))
		if code == 0 {
			// The command's work was cut short: never report success.
			return exitNotAcquired
		}
		return code
	case <-sigCtx.Done():
		return stopFor("signal received")
	}
}

// connectForCommand does what lock run and leader run need before they
// contend: it checks the connection flags (exit 2), finds the command
// (127/126: a typo must not take a lock, draw a fencing token or win a
// term), makes a closed stdout or stderr (coordctl ... | head) a write
// error instead of a SIGPIPE death that would leave the lock held, and
// connects (exit 1). On failure stop is nil and code is the exit status.
func connectForCommand(name string, cf *connFlags, cmdArgs []string, stderr io.Writer) (coord *coordination.Coordinator, desc string, stop func(), code int) {
	if err := cf.check(); err != nil {
		fmt.Fprintf(stderr, "coordctl %s: %v\n", name, err)
		return nil, "", nil, 2
	}
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		fmt.Fprintf(stderr, "coordctl %s: cannot start %s: %v\n", name, cmdArgs[0], err)
		return nil, "", nil, exitStatusFor(err)
	}
	signal.Ignore(syscall.SIGPIPE)
	coord, desc, stop, err := cf.coordinator()
	if err != nil {
		fmt.Fprintf(stderr, "coordctl %s: %v\n", name, err)
		return nil, "", nil, 1
	}
	return coord, desc, stop, 0
}
