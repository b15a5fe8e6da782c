// Command scheduled-job is a worker that runs a periodic job on exactly one
// of its replicas: every replica campaigns for leadership, the leader runs
// the job every --every, and each run stores its result with the term's
// fencing token, so a stale leader (paused past its lease while a successor
// took over) cannot overwrite a newer result.
//
// Run two or three replicas against one server and stop the leader (Ctrl-C
// releases leadership at once; kill -9 lets the lease expire):
//
//	go run ./examples/scheduled-job --redis redis://127.0.0.1:6379/0 --id a
//	go run ./examples/scheduled-job --redis redis://127.0.0.1:6379/0 --id b
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/cliconn"
	"github.com/coordkit/coordination/leader"
)

// The election's keys and the job's result, in one {hash tag} (one Cluster
// slot for the keys the fencing lock needs together).
const (
	leaseKey  = "{scheduled-job}:leader"
	fenceKey  = "{scheduled-job}:fence"
	resultKey = "{scheduled-job}:last-run"
)

func main() {
	redis.SetLogger(quiet{}) // connection errors are reported once, below
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scheduled-job:", err)
		os.Exit(cliconn.ExitCode(err)) // 2 bad flags, 3 no server, 1 otherwise
	}
}

type quiet struct{}

// Printf logs one formatted line (go-redis' internal logger interface).
func (quiet) Printf(context.Context, string, ...any) {}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("scheduled-job", flag.ContinueOnError)
	var conn cliconn.Flags
	conn.Register(fs) // --redis (default $COORD_REDIS_URL, else redis://127.0.0.1:6379/0), --cluster, --sentinel
	host, _ := os.Hostname()
	id := fs.String("id", host+":"+strconv.Itoa(os.Getpid()), "this replica's identity")
	every := fs.Duration("every", 10*time.Second, "how often the leader runs the job")
	lease := fs.Duration("lease", 15*time.Second, "leader lease: a crashed leader is replaced after about this long")
	retry := fs.Duration("retry", time.Second, "retry delay between campaign attempts")
	runs := fs.Int("runs", 0, "exit after this replica ran the job this many times (0: run until interrupted)")
	giveUp := fs.Duration("give-up", 30*time.Second, "exit when the server has been unreachable this long")
	if err := fs.Parse(args); err != nil {
		return &cliconn.UsageError{Msg: err.Error()}
	}
	switch {
	case *every <= 0:
		return &cliconn.UsageError{Msg: fmt.Sprintf("--every must be positive, got %v; e.g. --every 10s", *every)}
	case *giveUp <= 0:
		return &cliconn.UsageError{Msg: fmt.Sprintf("--give-up must be positive, got %v; e.g. --give-up 30s", *giveUp)}
	case *runs < 0:
		return &cliconn.UsageError{Msg: fmt.Sprintf("--runs must not be negative, got %d; e.g. --runs 3", *runs)}
	}
	if err := conn.Resolve(); err != nil {
		return err
	}
	if !conn.Given() {
		conn.URL = "redis://127.0.0.1:6379/0"
	}
	rdb, closeRDB, err := conn.Open(ctx, false) // pings: an unreachable server is reported at once
	if err != nil {
		return err
	}
	defer closeRDB()
	coord, err := coordination.New(rdb)
	if err != nil {
		return err
	}
	result, err := fencing.NewGuarded(coord, resultKey)
	if err != nil {
		return err
	}

	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	done := func() { stop(nil) }
	go watchServer(ctx, rdb, out, *id, *retry, *giveUp, stop)
	ran := 0
	e, err := leader.New(coord, leaseKey, fenceKey, *id,
		leader.WithLeaseDuration(*lease), leader.WithRetryDelay(*retry),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			fmt.Fprintf(out, "%s: leading (fencing token %d)\n", *id, term.FencingToken())
			tick := time.NewTicker(*every)
			defer tick.Stop()
			for {
				stale, err := runJob(ctx, result, out, *id, term.FencingToken())
				switch {
				case stale:
					// A newer leader has written: this term is over whatever
					// we believe. Step down.
					fmt.Fprintf(out, "%s: a newer leader wrote; stepping down\n", *id)
					return nil
				case err != nil && ctx.Err() == nil:
					fmt.Fprintf(out, "%s: job failed: %v\n", *id, err)
				case err == nil:
					ran++
					if *runs > 0 && ran >= *runs {
						done() // leave: Run releases leadership and returns
						return nil
					}
				}
				select {
				case <-ctx.Done():
					fmt.Fprintf(out, "%s: no longer leading\n", *id)
					return nil
				case <-tick.C:
				}
			}
		}))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: campaigning on %s\n", *id, rdb.Desc)
	err = e.Run(ctx)
	if cause := context.Cause(ctx); cliconn.IsConnError(cause) {
		return cause
	}
	return err
}

// watchServer pings the server every period. Campaigns retry transient
// errors forever; this bounds that: once the server has been unreachable
// for giveUp, it ends the run with a clear error (exit 3). It says once
// when the server stops answering, and once when it answers again.
func watchServer(ctx context.Context, c redis.UniversalClient, out io.Writer, id string, period, giveUp time.Duration, stop context.CancelCauseFunc) {
	t := time.NewTicker(period)
	defer t.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := cliconn.Ping(ctx, c, false)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !since.IsZero() {
				fmt.Fprintf(out, "%s: the server answers again\n", id)
			}
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
			fmt.Fprintf(out, "%s: %v; giving up in %v\n", id, err, giveUp)
		case time.Since(since) >= giveUp:
			stop(&cliconn.ConnError{Msg: fmt.Sprintf("the server has been unreachable for %v: %v", giveUp, err), Err: err})
			return
		}
	}
}

// runJob does the scheduled work and records it in result under the
// fencing token. It reports stale when result already holds a newer
// token's result.
func runJob(ctx context.Context, result *fencing.Guarded, out io.Writer, id string, token int64) (stale bool, err error) {
	prev, _, found, err := result.Get(ctx)
	if err != nil {
		return false, err
	}
	n := 0
	if found {
		n, _ = strconv.Atoi(string(prev))
	}
	n++ // the work itself: here, counting the runs
	ok, _, err := result.Set(ctx, token, []byte(strconv.Itoa(n)), 0)
	if err != nil || !ok {
		return !ok && err == nil, err
	}
	fmt.Fprintf(out, "%s: job run #%d done (fencing token %d)\n", id, n, token)
	return false, nil
}
