package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/semaphore"
)

func init() {
	register(command{
		name:  "semaphore run",
		usage: "semaphore run --key K --capacity N [--permits 1] -- cmd args  run a command holding semaphore permits (a distributed sem)",
		run:   runSemaphoreRun,
	})
}

func runSemaphoreRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("semaphore run", stdout, stderr, `usage: coordctl semaphore run --key K --capacity N [--permits 1] [--ttl 30s] [--timeout 0 | --no-wait] [--grace 10s] -- cmd args

Runs cmd while holding --permits permits of the counting semaphore K of capacity N
(a distributed sem: at most N permits are held at once by every process using K).
It waits for the permits (without polling), starts cmd with COORD_SEMAPHORE_KEY and
COORD_PERMITS in its environment, renews the permits every TTL/3 and releases them
when cmd exits. If renewals fail, cmd gets SIGTERM when what is left of the permits
falls to --grace (at most TTL/4), and SIGKILL when their local deadline passes; if
an operator removed them, SIGTERM, then SIGKILL after --grace. Either way coordctl
exits 75. On SIGINT/SIGTERM coordctl stops cmd the same way and releases the permits.
cmd and everything it starts never outlive coordctl: if coordctl dies (kill -9
included) they are killed at once (see coordctl lock run --help).
Every user of K must give the same --capacity, unless a capacity was set in the
key (semaphore.SetCapacity): that one is then in force for every user.

Exit status: cmd's own (128+N when killed by signal N); 1 when --no-wait or --timeout
found no free permit (or the capacity differs from the one in use); 75 when the
permits were lost while cmd ran (or came back with too little left to start it);
127/126 when cmd cannot be found or started (no
permit is taken); 2 on bad usage; 3 when the server cannot be reached.`,
		`coordctl semaphore run --redis redis://127.0.0.1:6379/0 --key encoders --capacity 4 -- ffmpeg -i in.mov out.mp4
coordctl semaphore run --key encoders --capacity 4 --no-wait -- ./encode.sh   # $COORD_REDIS_URL; exit 1 when all 4 are taken`)
	key := fs.String("key", "", "semaphore key (one sorted set); required")
	capacity := fs.Int64("capacity", 0, "the semaphore's capacity, the same for every user of the key; required")
	permits := fs.Int64("permits", 1, "permits to hold while the command runs (1 to capacity)")
	hf := addHoldFlags(fs, "the permits", "taken")
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
	}
	if code := fs.checkKey(*key); code != 0 {
		return code
	}
	if code := hf.check(cmdArgs, "./encode.sh"); code != 0 {
		return code
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
	if *hf.noWait {
		logf("trying for %d of %d permits of %q on %s (--no-wait)", *permits, *capacity, *key, desc)
	} else {
		logf("waiting for %d of %d permits of %q on %s", *permits, *capacity, *key, desc)
	}
	err = hf.acquire(sigCtx, func(ctx context.Context, block bool) (err error) {
		if block {
			p, err = sem.AcquireN(ctx, *permits, *hf.ttl)
		} else {
			p, err = sem.TryAcquireN(ctx, *permits, *hf.ttl)
		}
		return err
	})
	if errors.Is(err, coordination.ErrConfigMismatch) {
		logf("%q is in use with another capacity: %v", *key, err)
		return exitRefused
	}
	if code, ok := hf.outcome(sigCtx, err, logf, fmt.Sprintf("no free permit in %q (capacity %d)", *key, *capacity)); !ok {
		return code
	}
	p.KeepAlive()
	logf("acquired %d permit(s) of %q; starting %s", *permits, *key, shown(cmdArgs[0]))
	return runHolding(p, "permit", *hf.ttl, cmdArgs, []string{
		"COORD_SEMAPHORE_KEY=" + *key,
		"COORD_PERMITS=" + strconv.FormatInt(*permits, 10),
	}, *hf.grace, sigCtx, logf, stdout, stderr, fs.name)
}
