package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/leadercore"
	"github.com/coordkit/coordination/leader"
)

func init() {
	register(command{
		name:  "leader run",
		usage: "leader run --key K [--id NAME] [--lease 15s] -- cmd args  run a command only while leader",
		run:   runLeaderRun,
	})
	register(command{
		name:  "leader status",
		usage: "leader status --key K [--watch]             show who leads the election K",
		run:   runLeaderStatus,
	})
}

// fencedKeys returns the lease key {key}:lease and the fencing counter key
// {key}:fence of the election or lock named key (lease is "leader" or
// "lock"): one {hash tag}, so one Cluster slot.
func fencedKeys(key, lease string) (leaseKey, fenceKey string) {
	tag := "{" + key + "}:"
	return tag + lease, tag + "fence"
}

// timeline returns the logf of lock run and leader run: it prints a line
// "15:04:05.000 coordctl <who>: message" on w.
func timeline(w io.Writer, who string) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(w, "%s coordctl %s: %s\n", time.Now().Format("15:04:05.000"), who, fmt.Sprintf(format, a...))
	}
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func runLeaderRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("leader run", stdout, stderr, `usage: coordctl leader run --key K [--id NAME] [--lease 15s] [--retry 1s] [--grace 10s] -- cmd args

Campaigns for the leadership of election K and runs cmd only while leader, with
COORD_FENCING_TOKEN (the term's fencing token) and COORD_LEADER_ID in its environment.
When leadership is lost the command gets SIGTERM (SIGKILL after --grace) and coordctl
campaigns again. When the command exits on its own, coordctl releases leadership and
exits with its status. On SIGINT/SIGTERM it stops the command, releases leadership and
exits with the command's status (0 when it was not leading). cmd and everything it
starts never outlive the leadership: if coordctl dies (kill -9 included) they are
killed at once (see coordctl lock run --help).`, `coordctl leader run --redis redis://127.0.0.1:6379/0 --key nightly --id "$(hostname)" --lease 15s -- ./report.sh`)
	key := fs.String("key", "", "election name (keys {K}:leader and {K}:fence); required")
	id := fs.String("id", defaultIdentity(), "this contender's identity, shown to the others")
	lease := fs.Duration("lease", leader.DefaultLeaseDuration, "lease duration, at least 1s: a crashed leader is replaced after about this long")
	retry := fs.Duration("retry", leader.DefaultRetryDelay, "retry delay between campaign attempts")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping the command (0: SIGKILL at once)")
	fs.allowZero("grace")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cmdArgs := fs.Args()
	switch {
	case *key == "":
		return fs.usagef("--key is required, e.g. --key nightly")
	case len(cmdArgs) == 0:
		return fs.usagef("a command is required after --, e.g. -- ./report.sh")
	case *grace < 0:
		return fs.usagef("--grace must not be negative; e.g. --grace 10s")
	case *lease < max(minRunTTL, leader.MinLeaseDuration):
		return fs.usagef("--lease must be at least %v (the command's processes must be gone before the lease can expire when coordctl dies), got %v; e.g. --lease 15s", max(minRunTTL, leader.MinLeaseDuration), *lease)
	case *retry < time.Millisecond:
		return fs.usagef("--retry must be at least 1ms, got %v; e.g. --retry 1s", *retry)
	case *id == "":
		return fs.usagef("--id must not be empty, e.g. --id \"$(hostname)\"")
	}
	if code := fs.checkKey(*key, "{K}:leader", "{K}:fence"); code != 0 {
		return code
	}
	if code := fs.checkIdentity("--id", *id); code != 0 {
		return code
	}
	coord, desc, stop, code := connectForCommand(fs, cmdArgs)
	if stop == nil {
		return code
	}
	defer stop()

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, finish := context.WithCancel(sigCtx)
	defer finish()

	var (
		mu       sync.Mutex
		status   int // exit status to return
		startErr error
	)
	// The identity quoted: an --id with a newline cannot forge a log line.
	logf := timeline(stderr, "leader run "+strconv.Quote(*id))
	leaseKey, fenceKey := fencedKeys(*key, "leader")
	e, err := leader.New(coord, leaseKey, fenceKey, *id,
		leader.WithLeaseDuration(*lease), leader.WithRetryDelay(*retry),
		leader.OnElected(func(tctx context.Context, term *leader.Term) error {
			logf("elected with fencing token %d; starting %s", term.FencingToken(), shown(cmdArgs[0]))
			c, err := startChild(cmdArgs, []string{
				"COORD_FENCING_TOKEN=" + strconv.FormatInt(term.FencingToken(), 10),
				"COORD_LEADER_ID=" + *id,
			}, *grace, stdout, stderr, logf)
			if err != nil {
				mu.Lock()
				startErr = err
				mu.Unlock()
				return err
			}
			select {
			case <-c.exited():
				code := c.wait()
				logf("command exited with status %d; resigning", code)
				mu.Lock()
				status = code
				mu.Unlock()
				finish()
				return nil
			case <-tctx.Done():
				why := "leadership lost"
				if sigCtx.Err() != nil {
					why = "signal received"
				}
				logf("%s; stopping the command (SIGTERM, SIGKILL after %v)", why, *grace)
				code := c.stop(*grace)
				if sigCtx.Err() != nil {
					logf("command stopped with status %d; releasing leadership", code)
					mu.Lock()
					status = code
					mu.Unlock()
				} else {
					logf("command stopped with status %d; campaigning again", code)
				}
				return nil
			}
		}),
	)
	if err != nil {
		return fail(stderr, "leader run", err)
	}
	logf("campaigning for %q on %s (lease %v)", *key, desc, *lease)
	err = e.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case startErr != nil:
		fmt.Fprintf(stderr, "coordctl leader run: cannot start %s: %v\n", shown(cmdArgs[0]), startErr)
		return exitStatusFor(startErr)
	case err != nil:
		return fail(stderr, "leader run", err)
	default:
		return status // the command's, or 0 when it never ran or was stopped by a loss
	}
}

func runLeaderStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("leader status", stdout, stderr, `usage: coordctl leader status --key K [--watch [--poll 1s]]

Prints who leads election K, its fencing token and the lease's remaining time.
Exit status: 0 when there is a leader, 1 when there is none, 3 when the server
cannot be reached. With --watch it prints a line per change until interrupted.`, `coordctl leader status --redis redis://127.0.0.1:6379/0 --key nightly
coordctl leader status --key nightly --watch   # $COORD_REDIS_URL`)
	key := fs.String("key", "", "election name (as given to leader run); required")
	watch := fs.Bool("watch", false, "print a line per leadership change until interrupted")
	poll := fs.Duration("poll", time.Second, "with --watch: how often to look for a new leader")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	switch {
	case *key == "":
		return fs.usagef("--key is required, e.g. --key nightly")
	case fs.NArg() > 0:
		return fs.usagef("unexpected arguments %s", echoArgs(fs.Args()))
	case *watch && *poll <= 0:
		return fs.usagef("--poll must be positive, got %v; e.g. --poll 1s", *poll)
	}
	if code := fs.checkKey(*key, "{K}:leader"); code != 0 {
		return code
	}
	coord, _, _, stop, code := fs.connectCoord()
	if stop == nil {
		return code
	}
	defer stop()
	leaseKey, _ := fencedKeys(*key, "leader")
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if *watch {
		err := leader.Observe(ctx, coord, leaseKey, *poll, func(i leader.Info) {
			if i.FencingToken == 0 {
				fmt.Fprintf(stdout, "%s  no leader\n", time.Now().Format(time.TimeOnly))
				return
			}
			fmt.Fprintf(stdout, "%s  leader %s  fencing token %d\n", time.Now().Format(time.TimeOnly), shown(i.Identity), i.FencingToken)
		})
		if err != nil && ctx.Err() == nil {
			return fail(stderr, "leader status", err)
		}
		return exitOK
	}
	info, err := leader.Get(ctx, coord, leaseKey)
	if errors.Is(err, leader.ErrNoLeader) {
		fmt.Fprintf(stdout, "no leader for %q\n", *key)
		return exitRefused
	}
	if err != nil {
		return fail(stderr, "leader status", err)
	}
	fmt.Fprintf(stdout, "leader:        %s\nfencing token: %d\nlease expires: in %v\n", shown(info.Identity), info.FencingToken, info.TTL.Round(time.Millisecond))
	return 0
}

// shown quotes an identity when it holds characters that would garble a
// terminal line (layout.Shown).
func shown(id string) string { return layout.Shown(id) }

func init() {
	register(command{
		name:  "leader resign",
		usage: "leader resign --key K [--id NAME]             end the current term of election K",
		run:   runLeaderResign,
	})
}

// runLeaderResign deletes an election's lease, after checking under WATCH
// that it is a leader's lease (and, with --id, whose).
func runLeaderResign(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("leader resign", stdout, stderr, `usage: coordctl leader resign --key K [--id NAME]

Ends the current term of election K by deleting its lease ({K}:leader): a
contender is elected at its next attempt (within its retry delay). The leader,
if alive, finds its lease gone at its next renewal: its term ends (the term's
context is cancelled, cause: lost) and it campaigns again. Use it to move
leadership away from a leader that hangs or must drain. With --id, only when
NAME leads. The fencing counter is kept: the next term's token is higher.
Exit status: 0 the term was ended; 1 nobody leads, or another identity leads;
2 bad usage; 3 the server cannot be reached.`, `coordctl leader resign --redis redis://127.0.0.1:6379/0 --key nightly --id worker-7`)
	name := fs.String("key", "", "election name (as given to leader run); required")
	id := fs.String("id", "", "resign only when this identity leads")
	leaseKey := new(string)
	return oneShot(fs, args, name, 0, func() int {
		if code := fs.checkKey(*name, "{K}:leader"); code != 0 {
			return code
		}
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "id" })
		if given && *id == "" {
			return fs.usagef("--id is empty: give the identity that must lead, or leave --id out to end any leader's term")
		}
		if code := fs.checkIdentity("--id", *id); code != 0 {
			return code
		}
		*leaseKey, _ = fencedKeys(*name, "leader")
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		full := fs.cf.prefix + *leaseKey
		c := coord.Client()
		var holder, fence string
		_, err := guarded(ctx, c, full, []string{leadercore.LeaseLayout.Kind}, func(*layout.Report) error {
			v, err := c.HMGet(ctx, full, "holder", "fence").Result()
			if err != nil {
				return err
			}
			holder, _ = v[0].(string)
			fence, _ = v[1].(string)
			if *id != "" && holder != *id {
				return fmt.Errorf("%w: %s leads election %q, not %s", errRefused, shown(holder), *name, shown(*id))
			}
			return nil
		}, func(p redis.Pipeliner, _ *layout.Report) { p.Del(ctx, full) })
		if err != nil {
			if errors.Is(err, errNoKey) {
				err = fmt.Errorf("%w: nobody leads election %q", errRefused, *name)
			}
			return refusal(stderr, fs.name, err)
		}
		fmt.Fprintf(stdout, "ended the term of leader %s (fencing token %s) of election %q\n", shown(holder), fence, *name)
		return exitOK
	})
}
