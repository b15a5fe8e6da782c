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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scheduled-job:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("scheduled-job", flag.ContinueOnError)
	url := fs.String("redis", envOr("COORD_REDIS_URL", "redis://127.0.0.1:6379/0"), "server URL")
	host, _ := os.Hostname()
	id := fs.String("id", host+":"+strconv.Itoa(os.Getpid()), "this replica's identity")
	every := fs.Duration("every", 10*time.Second, "how often the leader runs the job")
	lease := fs.Duration("lease", 15*time.Second, "leader lease: a crashed leader is replaced after about this long")
	retry := fs.Duration("retry", time.Second, "retry delay between campaign attempts")
	runs := fs.Int("runs", 0, "exit after this replica ran the job this many times (0: run until interrupted)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt, err := redis.ParseURL(*url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		return err
	}

	ctx, done := context.WithCancel(ctx)
	defer done()
	ran := 0
	e, err := leader.New(coord, leaseKey, fenceKey, *id,
		leader.WithLeaseDuration(*lease), leader.WithRetryDelay(*retry),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			fmt.Fprintf(out, "%s: leading (fencing token %d)\n", *id, term.FencingToken())
			tick := time.NewTicker(*every)
			defer tick.Stop()
			for {
				stale, err := runJob(ctx, coord, out, *id, term.FencingToken())
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
	fmt.Fprintf(out, "%s: campaigning\n", *id)
	return e.Run(ctx)
}

// runJob does the scheduled work and records it under the fencing token.
// It reports stale when the store already holds a newer token's result.
func runJob(ctx context.Context, coord *coordination.Coordinator, out io.Writer, id string, token int64) (stale bool, err error) {
	prev, _, found, err := fencing.GuardedGet(ctx, coord, resultKey)
	if err != nil {
		return false, err
	}
	n := 0
	if found {
		n, _ = strconv.Atoi(string(prev))
	}
	n++ // the work itself: here, counting the runs
	ok, _, err := fencing.GuardedSet(ctx, coord, resultKey, token, []byte(strconv.Itoa(n)), 0)
	if err != nil || !ok {
		return !ok && err == nil, err
	}
	fmt.Fprintf(out, "%s: job run #%d done (fencing token %d)\n", id, n, token)
	return false, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
