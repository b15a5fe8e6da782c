package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/semaphore"
)

func init() {
	register(command{
		name:  "semaphore run",
		usage: "semaphore run --key K --capacity N [--permits 1] -- cmd args run a command holding semaphore permits (a distributed sem)",
		run:   runSemaphoreRun,
	})
}

func runSemaphoreRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("semaphore run", stdout, stderr, `usage: coordctl semaphore run --key K --capacity N [--permits 1] [--ttl 30s] [--timeout 0 | --no-wait] [--grace 10s] -- cmd args

Runs cmd while holding --permits permits of the counting semaphore K of capacity N
(a distributed sem: at most N permits are held at once by every process using K).
It waits for the permits (without polling), starts cmd with COORD_SEMAPHORE_KEY and
COORD_PERMITS in its environment, renews the permits every TTL/3 and releases them
when cmd exits. If they are lost (renewals fail until their local deadline, or an
operator removed them), cmd gets SIGTERM, then SIGKILL after --grace, and coordctl
exits 75. On SIGINT/SIGTERM coordctl stops cmd the same way and releases the permits.
Every user of K must give the same --capacity.

Exit status: cmd's own (128+N when killed by signal N); 1 when --no-wait or --timeout
found no free permit (or the capacity differs from the one in use); 75 when the
permits were lost while cmd ran; 127/126 when cmd cannot be found or started (no
permit is taken); 2 on bad usage; 3 when the server cannot be reached.`,
		`coordctl semaphore run --redis redis://127.0.0.1:6379/0 --key encoders --capacity 4 -- ffmpeg -i in.mov out.mp4
coordctl semaphore run --key encoders --capacity 4 --no-wait -- ./encode.sh   # $COORD_REDIS_URL; exit 1 when all 4 are taken`)
	key := fs.String("key", "", "semaphore key (one sorted set); required")
	capacity := fs.Int64("capacity", 0, "the semaphore's capacity, the same for every user of the key; required")
	permits := fs.Int64("permits", 1, "permits to hold while the command runs (1 to capacity)")
	ttl := fs.Duration("ttl", 30*time.Second, "permit TTL: a crashed coordctl's permits free themselves after this long")
	timeout := fs.Duration("timeout", 0, "give up waiting for permits after this long (exit 1); 0 waits forever")
	noWait := fs.Bool("no-wait", false, "fail at once (exit 1) when no permit is free")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping the command")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cmdArgs := fs.Args()
	switch {
	case *key == "":
		return fs.usagef("--key is required, e.g. --key encoders")
	case *capacity < 1 || *capacity > semaphore.MaxCapacity:
		return fs.usagef("--capacity is required, 1 or more, e.g. --capacity 4")
	case *permits < 1 || *permits > *capacity:
		return fs.usagef("--permits must be 1 to --capacity (%d), got %d; e.g. --permits 1", *capacity, *permits)
	case len(cmdArgs) == 0:
		return fs.usagef("a command is required after --, e.g. -- ./encode.sh")
	case *ttl < 10*time.Millisecond:
		return fs.usagef("--ttl must be at least 10ms, got %v; e.g. --ttl 30s", *ttl)
	case *timeout < 0:
		return fs.usagef("--timeout must not be negative; e.g. --timeout 1m")
	case *grace < 0:
		return fs.usagef("--grace must not be negative; e.g. --grace 10s")
	case *noWait && *timeout > 0:
		return fs.usagef("give --no-wait or --timeout, not both")
	}
	coord, desc, stop, code := connectForCommand(fs, cmdArgs)
	if stop == nil {
		return code
	}
	defer stop()
	logf := timeline(stderr, "semaphore run")
	sem, err := semaphore.New(coord, *key, *capacity)
	if err != nil {
		return fail(stderr, fs.name, err)
	}
	sigCtx, stopSignals := notifySignals()
	defer stopSignals()
	var p *semaphore.Permit
	if *noWait {
		p, err = sem.TryAcquireN(sigCtx, *permits, *ttl)
	} else {
		wctx, cancel := sigCtx, context.CancelFunc(func() {})
		if *timeout > 0 {
			wctx, cancel = context.WithTimeout(sigCtx, *timeout)
		}
		logf("waiting for %d of %d permits of %q on %s", *permits, *capacity, *key, desc)
		p, err = sem.AcquireN(wctx, *permits, *ttl)
		cancel()
	}
	switch {
	case err == nil:
	case sigCtx.Err() != nil:
		logf("interrupted while waiting for permits")
		return 130
	case errors.Is(err, coordination.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		logf("no free permit in %q (capacity %d)", *key, *capacity)
		return exitRefused
	case errors.Is(err, coordination.ErrCapacityMismatch):
		logf("%q is in use with another capacity: %v", *key, err)
		return exitRefused
	default:
		return fail(stderr, fs.name, err)
	}
	p.KeepAlive()
	logf("acquired %d permit(s) of %q; starting %s", *permits, *key, cmdArgs[0])
	return runHolding(p, "permit", cmdArgs, []string{
		"COORD_SEMAPHORE_KEY=" + *key,
		"COORD_PERMITS=" + strconv.FormatInt(*permits, 10),
	}, *grace, sigCtx, logf, stdout, stderr, fs.name)
}
