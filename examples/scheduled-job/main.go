// Command scheduled-job is a worker that runs a periodic job on exactly one
// of its replicas: every replica campaigns for leadership, the leader runs
// the job every -every, and each run stores its result with the term's
// fencing token, so a stale leader (paused past its lease while a successor
// took over) cannot overwrite a newer result.
//
// Run two or three replicas against one server and stop the leader (Ctrl-C
// releases leadership at once; kill -9 lets the lease expire):
//
//	go run . -redis redis://127.0.0.1:6379/0 -id a
//	go run . -redis redis://127.0.0.1:6379/0 -id b
//
// It uses only the public API; README.md beside this file shows a session.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination"
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
	redis.SetLogger(quiet{}) // connection errors are reported once, below
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		log.Printf("scheduled-job: %v", err)
		os.Exit(exitCode(err)) // 2 bad flags, 1 otherwise
	}
}

// quiet discards go-redis' own log lines.
type quiet struct{}

// Printf logs one formatted line (go-redis' internal logger interface).
func (quiet) Printf(context.Context, string, ...any) {}

// usageError is a bad flag (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// run is the program: it parses args, logs to out and returns when ctx
// ends, after -runs runs, or on an error.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("scheduled-job", flag.ContinueOnError)
	fs.SetOutput(out)
	redisURL := fs.String("redis", "", "server URL, e.g. redis://user:PASSWORD@127.0.0.1:6379/0 or rediss://... for TLS (default $COORD_REDIS_URL, else redis://127.0.0.1:6379/0)")
	host, _ := os.Hostname()
	id := fs.String("id", host+":"+strconv.Itoa(os.Getpid()), "this replica's identity")
	every := fs.Duration("every", 10*time.Second, "how often the leader runs the job")
	lease := fs.Duration("lease", 15*time.Second, "leader lease: a crashed leader is replaced after about this long")
	retry := fs.Duration("retry", time.Second, "retry delay between campaign attempts")
	runs := fs.Int("runs", 0, "exit after this replica ran the job this many times (0: run until interrupted)")
	giveUp := fs.Duration("give-up", 30*time.Second, "exit when the server has been unreachable this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage is printed, exit 0
		}
		return usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q (this program takes flags only; see -h)", fs.Arg(0))}
	case *every <= 0:
		return usageError{fmt.Errorf("-every must be positive, got %v; e.g. -every 10s", *every)}
	case *giveUp <= 0:
		return usageError{fmt.Errorf("-give-up must be positive, got %v; e.g. -give-up 30s", *giveUp)}
	case *runs < 0:
		return usageError{fmt.Errorf("-runs must not be negative, got %d; e.g. -runs 3", *runs)}
	}
	logger := log.New(out, "", log.LstdFlags|log.Lmicroseconds)

	rdb, err := connect(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
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
	go watchServer(ctx, rdb, logger, *id, *retry, *giveUp, stop)
	ran := 0
	e, err := leader.New(coord, leaseKey, fenceKey, *id,
		leader.WithLeaseDuration(*lease), leader.WithRetryDelay(*retry),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			logger.Printf("%s: leading (fencing token %d)", *id, term.FencingToken())
			tick := time.NewTicker(*every)
			defer tick.Stop()
			for {
				stale, err := runJob(ctx, result, logger, *id, term.FencingToken())
				switch {
				case stale:
					// A newer leader has written: this term is over whatever
					// we believe. Step down.
					logger.Printf("%s: a newer leader wrote; stepping down", *id)
					return nil
				case err != nil && ctx.Err() == nil:
					logger.Printf("%s: job failed: %v", *id, err)
				case err == nil:
					ran++
					if *runs > 0 && ran >= *runs {
						done() // leave: Run releases leadership and returns
						return nil
					}
				}
				select {
				case <-ctx.Done():
					logger.Printf("%s: no longer leading", *id)
					return nil
				case <-tick.C:
				}
			}
		}))
	if err != nil {
		return err
	}
	logger.Printf("%s: campaigning on %s", *id, rdb.Options().Addr)
	err = e.Run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, errUnreachable) {
		return cause
	}
	return err
}

// connect opens a client for the server at rawURL (else
// $COORD_REDIS_URL, else a local server) and pings it, so that a wrong
// address is reported at once.
func connect(ctx context.Context, rawURL string) (*redis.Client, error) {
	if rawURL == "" {
		rawURL = os.Getenv("COORD_REDIS_URL")
	}
	if rawURL == "" {
		rawURL = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, usageError{fmt.Errorf("-redis: %v; want a URL such as redis://user:PASSWORD@127.0.0.1:6379/0", err)}
	}
	// A context's deadline then bounds every command, not only the wait
	// for a connection.
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	ping, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ping).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach the server at %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// errUnreachable ends a run whose server stopped answering for -give-up.
var errUnreachable = errors.New("the server is unreachable")

// watchServer pings the server every period. Campaigns retry transient
// errors forever; this bounds that: once the server has been unreachable
// for giveUp, it ends the run with an error wrapping errUnreachable. It
// says once when the server stops answering, and once when it answers
// again.
func watchServer(ctx context.Context, rdb *redis.Client, logger *log.Logger, id string, period, giveUp time.Duration, stop context.CancelCauseFunc) {
	t := time.NewTicker(period)
	defer t.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ping, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := rdb.Ping(ping).Err()
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !since.IsZero() {
				logger.Printf("%s: the server answers again", id)
			}
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
			logger.Printf("%s: the server does not answer (%v); giving up in %v", id, err, giveUp)
		case time.Since(since) >= giveUp:
			stop(fmt.Errorf("%w: no answer for %v: %v", errUnreachable, giveUp, err))
			return
		}
	}
}

// runJob does the scheduled work and records it in result under the
// fencing token. It reports stale when result already holds a newer
// token's result.
func runJob(ctx context.Context, result *fencing.Guarded, logger *log.Logger, id string, token int64) (stale bool, err error) {
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
	logger.Printf("%s: job run #%d done (fencing token %d)", id, n, token)
	return false, nil
}
