package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/ratelimit"
)

// The one-shot operating commands: latch, ratelimit, denylist.

func init() {
	register(command{name: "latch create", usage: "latch create --key K --count N [--deadline 10m]            create a countdown latch", run: runLatchCreate})
	register(command{name: "latch countdown", usage: "latch countdown --key K                                   count a latch down by one", run: runLatchCountdown})
	register(command{name: "latch wait", usage: "latch wait --key K [--timeout 0]                          wait until a latch reaches zero", run: runLatchWait})
	register(command{name: "ratelimit try", usage: "ratelimit try --key K --algorithm A --limit N ...         take permits from a rate limiter", run: runRatelimitTry})
	register(command{name: "denylist add", usage: "denylist add --key K [--for D] ID...                        deny identities (for D: a lockout that ends)", run: runDenylist("add")})
	register(command{name: "denylist remove", usage: "denylist remove --key K ID...                             allow identities again", run: runDenylist("remove")})
	register(command{name: "denylist check", usage: "denylist check --key K ID                                 exit 0 when ID is allowed, 1 when denied", run: runDenylist("check")})
}

// oneShot parses a one-shot command's flags, checks --key and the
// argument count (nargs -1: one or more), connects, and runs fn with a
// context cancelled by SIGINT/SIGTERM. It returns the exit status.
//
// pre, when not nil, checks the other flags before anything is sent: it
// returns 0 when they are right, else the exit status (after fs.usagef).
func oneShot(fs *cmdFlags, args []string, key *string, nargs int, pre func() int, fn func(ctx context.Context, coord *coordination.Coordinator) int) int {
	if code, ok := fs.parse(args); !ok {
		return code
	}
	switch {
	case *key == "":
		return fs.usagef("--key is required, e.g. --key batch:42:done")
	case nargs == 0 && fs.NArg() > 0:
		return fs.usagef("unexpected arguments %s", echoArgs(fs.Args()))
	case nargs < 0 && fs.NArg() == 0:
		return fs.usagef("give one or more identities after the flags, e.g. tenant:42")
	case nargs > 0 && fs.NArg() != nargs:
		return fs.usagef("give exactly %d identity after the flags, e.g. tenant:42", nargs)
	}
	if code := fs.checkKey(*key); code != 0 {
		return code
	}
	if nargs != 0 {
		for i, id := range fs.Args() {
			if id == "" {
				return fs.usagef("identity %d is empty", i+1)
			}
			if code := fs.checkIdentity(fmt.Sprintf("identity %d", i+1), id); code != 0 {
				return code
			}
		}
	}
	if pre != nil {
		if code := pre(); code != 0 {
			return code
		}
	}
	coord, _, _, stop, code := fs.connectCoord()
	if stop == nil {
		return code
	}
	defer stop()
	ctx, stopSignals := notifySignals()
	defer stopSignals()
	return fn(ctx, coord)
}

func runLatchCreate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("latch create", stdout, stderr, `usage: coordctl latch create --key K --count N [--deadline 10m] [--key-ttl 0]

Creates a countdown latch of count N at K. With --deadline the latch breaks if it
has not reached zero by then (waiters get an error instead of waiting forever).
Exit status: 0 created; 1 a latch (or something else) already exists at K; 2 bad
usage; 3 the server cannot be reached.`, `coordctl latch create --redis redis://127.0.0.1:6379/0 --key batch:42:done --count 3 --deadline 10m`)
	key := fs.String("key", "", "latch key; required")
	count := fs.Int64("count", -1, "the count, 0 or more; required")
	deadline := fs.Duration("deadline", 0, "break the latch if it has not reached zero after this long (omit: never)")
	keyTTL := fs.Duration("key-ttl", 0, "delete the latch's key this long after its creation (omit: never)")
	return oneShot(fs, args, key, 0, func() int {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "count" })
		switch {
		case !given:
			return fs.usagef("--count is required, 0 or more, e.g. --count 3")
		case *count < 0:
			return fs.usagef("--count must be 0 or more, got %d, e.g. --count 3", *count)
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		var opts []latch.Option
		if *deadline > 0 {
			opts = append(opts, latch.WithDeadline(*deadline))
		}
		if *keyTTL > 0 {
			opts = append(opts, latch.WithKeyTTL(*keyTTL))
		}
		lt, err := latch.New(coord, *key, opts...)
		if err != nil {
			return fail(stderr, fs.name, err)
		}
		l, err := lt.Create(ctx, *count)
		if errors.Is(err, latch.ErrExists) {
			fmt.Fprintf(stderr, "coordctl latch create: a latch already exists at %q (inspect it with coordctl inspect %s)\n", *key, *key)
			return exitRefused
		}
		if err != nil {
			return fail(stderr, fs.name, err)
		}
		fmt.Fprintf(stdout, "created latch %q: count %d, generation %d\n", *key, l.Initial(), l.Number())
		return exitOK
	})
}

func runLatchCountdown(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("latch countdown", stdout, stderr, `usage: coordctl latch countdown --key K

Counts the current generation of the latch at K down by one and prints the count
left. Exit status: 0 counted; 1 no latch at K, already complete, or broken (its
deadline passed); 2 bad usage; 3 the server cannot be reached.`, `coordctl latch countdown --redis redis://127.0.0.1:6379/0 --key batch:42:done`)
	key := fs.String("key", "", "latch key; required")
	return oneShot(fs, args, key, 0, nil, func(ctx context.Context, coord *coordination.Coordinator) int {
		l, err := joinLatch(ctx, coord, *key)
		if err == nil {
			var left int64
			left, err = l.CountDown(ctx)
			if err == nil {
				fmt.Fprintf(stdout, "%d left\n", left)
				return exitOK
			}
		}
		return latchFail(stderr, fs.name, *key, err)
	})
}

// joinLatch joins the current generation of the latch at key.
func joinLatch(ctx context.Context, coord *coordination.Coordinator, key string) (*latch.Generation, error) {
	l, err := latch.New(coord, key)
	if err != nil {
		return nil, err
	}
	return l.Join(ctx)
}

// latchFail prints a latch refusal in words and returns its exit status.
func latchFail(stderr io.Writer, name, key string, err error) int {
	switch {
	case errors.Is(err, latch.ErrNotFound):
		fmt.Fprintf(stderr, "coordctl %s: no latch at %q\n", name, key)
	case errors.Is(err, latch.ErrCompleted):
		fmt.Fprintf(stderr, "coordctl %s: the latch %q already reached zero\n", name, key)
	case errors.Is(err, latch.ErrBroken):
		fmt.Fprintf(stderr, "coordctl %s: the latch %q is broken: its deadline passed before it reached zero (%v)\n", name, key, err)
	case errors.Is(err, latch.ErrStaleGeneration):
		fmt.Fprintf(stderr, "coordctl %s: the latch %q was reset meanwhile; try again\n", name, key)
	default:
		return fail(stderr, name, err)
	}
	return exitRefused
}

func runLatchWait(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("latch wait", stdout, stderr, `usage: coordctl latch wait --key K [--timeout 0]

Waits (without polling) until the current generation of the latch at K reaches
zero. Exit status: 0 it reached zero; 1 no latch at K, it broke (deadline passed),
it was reset or deleted, or --timeout passed; 2 bad usage; 3 the server cannot be
reached.`, `coordctl latch wait --redis redis://127.0.0.1:6379/0 --key batch:42:done --timeout 10m && ./merge-results.sh`)
	key := fs.String("key", "", "latch key; required")
	timeout := fs.Duration("timeout", 0, "give up after this long (exit 1); 0 waits until the latch ends")
	fs.allowZero("timeout")
	return oneShot(fs, args, key, 0, func() int {
		if *timeout < 0 {
			return fs.usagef("--timeout must not be negative; e.g. --timeout 10m")
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		l, err := joinLatch(ctx, coord, *key)
		if err != nil {
			return latchFail(stderr, fs.name, *key, err)
		}
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		ok, err := l.Wait(ctx)
		switch {
		case ok:
			fmt.Fprintf(stdout, "latch %q reached zero\n", *key)
			return exitOK
		case err == nil:
			fmt.Fprintf(stderr, "coordctl latch wait: the latch %q was reset or deleted before it reached zero\n", *key)
			return exitRefused
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprintf(stderr, "coordctl latch wait: --timeout %v passed before the latch %q reached zero\n", *timeout, *key)
			return exitRefused
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(stderr, "coordctl latch wait: interrupted")
			return 130
		}
		return latchFail(stderr, fs.name, *key, err)
	})
}

func runRatelimitTry(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("ratelimit try", stdout, stderr, `usage: coordctl ratelimit try --key K --algorithm A --limit N [--window D | --period D] [--permits 1]

Takes --permits permits from the rate limiter at K, as an application with the same
settings would (every user of K must use the same algorithm and settings), and
prints the decision. Algorithms and their settings:
  fixed-window    --limit N per --window D
  sliding-window  --limit N per --window D, --segments S (default 10)
  token-bucket    bucket of --limit N, refilled --tokens T (default 1) per --period D
  gcra            burst --limit N, sustained --rate R (default 1) per --period D
Exit status: 0 granted; 1 limited (the retry-after is printed), or K holds another
algorithm, other settings or a key of another kind; 2 bad usage; 3 the server
cannot be reached.`,
		`coordctl ratelimit try --redis redis://127.0.0.1:6379/0 --key api:tenant:42 --algorithm token-bucket --limit 100 --tokens 10 --period 1s`)
	key := fs.String("key", "", "limiter key; required")
	algo := fs.String("algorithm", "", "fixed-window, sliding-window, token-bucket or gcra; required")
	limit := fs.Int("limit", 0, "the limit (window budget, bucket size or burst); required")
	window := fs.Duration("window", 0, "window length (fixed-window, sliding-window)")
	segments := fs.Int("segments", 10, "segments per window (sliding-window)")
	period := fs.Duration("period", 0, "refill period (token-bucket) or rate period (gcra)")
	tokens := fs.Int("tokens", 1, "tokens added per period (token-bucket)")
	rate := fs.Int("rate", 1, "permits per period (gcra)")
	permits := fs.Int("permits", 1, "permits to take")
	return oneShot(fs, args, key, 0, func() int {
		switch {
		case *limit < 1:
			return fs.usagef("--limit is required, 1 or more, e.g. --limit 100")
		case *permits < 1:
			return fs.usagef("--permits must be 1 or more, e.g. --permits 1")
		case (*algo == "fixed-window" || *algo == "sliding-window") && *window <= 0:
			return fs.usagef("--window is required for %s, e.g. --window 1m", *algo) // given, it is positive (parse)
		case (*algo == "token-bucket" || *algo == "gcra") && *period <= 0:
			return fs.usagef("--period is required for %s, e.g. --period 1s", *algo)
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		var (
			l   *ratelimit.Limiter
			err error
		)
		// Never migrate the application's stored settings to ours.
		strict := ratelimit.WithStrictSettings(true)
		switch *algo {
		case "fixed-window":
			l, err = ratelimit.New(coord, *key, ratelimit.FixedWindow{Limit: *limit, Window: *window}, strict)
		case "sliding-window":
			l, err = ratelimit.New(coord, *key, ratelimit.SlidingWindow{Limit: *limit, Window: *window, Segments: *segments}, strict)
		case "token-bucket":
			l, err = ratelimit.New(coord, *key, ratelimit.TokenBucket{Limit: *limit, TokensPerPeriod: *tokens, Period: *period}, strict)
		case "gcra":
			l, err = ratelimit.New(coord, *key, ratelimit.GCRA{Burst: *limit, Rate: *rate, Period: *period}, strict)
		case "":
			return fs.usagef("--algorithm is required: fixed-window, sliding-window, token-bucket or gcra, e.g. --algorithm token-bucket")
		default:
			return fs.usagef("--algorithm %q is not one of fixed-window, sliding-window, token-bucket, gcra", *algo)
		}
		if err != nil {
			return fs.usagef("%v", err)
		}
		defer l.Close()
		dec, err := l.Allow(ctx, *permits)
		if err != nil {
			if errors.Is(err, coordination.ErrConfigMismatch) {
				fmt.Fprintf(stderr, "coordctl ratelimit try: %q holds another algorithm or other settings: %v\n", *key, err)
				return exitRefused
			}
			return fail(stderr, fs.name, err)
		}
		if dec.Allowed() {
			fmt.Fprintf(stdout, "granted %d; %s\n", *permits, availableText(dec.Available()))
			return exitOK
		}
		if d, ok := dec.RetryAfter(); ok {
			fmt.Fprintf(stdout, "limited; retry after %v\n", d.Round(time.Millisecond))
		} else {
			fmt.Fprintf(stdout, "limited; %d permits can never be granted at once (more than --limit)\n", *permits)
		}
		return exitRefused
	})
}

func availableText(n int64) string {
	if n < 0 {
		return "available: unknown"
	}
	return strconv.FormatInt(n, 10) + " available"
}

func runDenylist(verb string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		var desc, example string
		nargs := -1
		switch verb {
		case "add":
			desc = "Adds identities to the deny list at K: every limiter bound to it refuses them\n(with --for D, until D has passed: a lockout that ends by itself).\nOther processes see the change within their cache lifetime."
			example = "coordctl denylist add --redis redis://127.0.0.1:6379/0 --key api:denied tenant:42 tenant:43"
		case "remove":
			desc = "Removes identities from the deny list at K."
			example = "coordctl denylist remove --redis redis://127.0.0.1:6379/0 --key api:denied tenant:42"
		case "check":
			desc = "Says whether ID is on the deny list at K, read from the server.\nExit status: 0 allowed (not listed), 1 denied."
			example = "coordctl denylist check --redis redis://127.0.0.1:6379/0 --key api:denied tenant:42 || echo denied"
			nargs = 1
		}
		fs := newFlags("denylist "+verb, stdout, stderr, "usage: coordctl denylist "+verb+" --key K ID...\n\n"+desc+
			"\nExit status: 0 done; 1 denied (check) or a key of another kind; 2 bad usage; 3 the server cannot be reached.", example)
		key := fs.String("key", "", "deny list key (a sorted set); required")
		var lockout *time.Duration
		if verb == "add" {
			lockout = fs.Duration("for", 0, "deny for this long only (at least 1ms); default: without end")
		}
		return oneShot(fs, args, key, nargs, nil, func(ctx context.Context, coord *coordination.Coordinator) int {
			d, err := ratelimit.NewDenyList(coord, *key, ratelimit.WithDenyCache(1, time.Nanosecond))
			if err != nil {
				return fail(stderr, fs.name, err)
			}
			for _, id := range fs.Args() {
				switch verb {
				case "add":
					if *lockout != 0 {
						err = d.DenyFor(ctx, id, *lockout)
					} else {
						err = d.Deny(ctx, id)
					}
				case "remove":
					err = d.Remove(ctx, id)
				case "check":
					var denied bool
					denied, err = d.Denied(ctx, id)
					if err == nil {
						if denied {
							fmt.Fprintf(stdout, "%s: denied\n", shown(id))
							return exitRefused
						}
						fmt.Fprintf(stdout, "%s: allowed\n", shown(id))
						return exitOK
					}
				}
				if err != nil {
					return fail(stderr, fs.name, err)
				}
				fmt.Fprintf(stdout, "%s: %s\n", shown(id), map[string]string{"add": "denied", "remove": "allowed"}[verb])
			}
			return exitOK
		})
	}
}
