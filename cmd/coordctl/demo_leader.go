package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/leader"
)

func init() {
	addScenario(scenario{
		order: 20,
		name:  "leader",
		title: "Leader election: three workers, a crashed leader, a clean resignation, a fenced late write",
		run:   demoLeader,
	})
}

// errCutOff is what a "crashed" worker's client answers to every command:
// the process no longer reaches Redis (a network error, so its keep-alive
// retries until the lease's local deadline), so it neither renews nor
// releases.
var errCutOff error = cutOffError{}

type cutOffError struct{}

// Error returns the error's message.
func (cutOffError) Error() string { return "worker crashed (cut off from Redis)" }

// Timeout reports true: the error is a timeout (net.Error).
func (cutOffError) Timeout() bool { return false }

// Temporary reports true: trying again may succeed (net.Error).
func (cutOffError) Temporary() bool { return true }

// cutHook is a go-redis hook that fails every command of a crashed worker.
type cutHook struct{ w *demoWorker }

// DialHook passes dials through unchanged (redis.Hook).
func (h cutHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook fails commands while the client is cut off (redis.Hook).
func (h cutHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.w.crashed.Load() {
			cmd.SetErr(errCutOff)
			return errCutOff
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook fails pipelines while the client is cut off (redis.Hook).
func (h cutHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.w.crashed.Load() {
			return errCutOff
		}
		return next(ctx, cmds)
	}
}

// cloneClient returns a new client with the options of c (a worker's own
// connection, so that cutting it off leaves the others alone).
func cloneClient(c redis.UniversalClient) (redis.UniversalClient, error) {
	switch v := c.(type) {
	case *redis.Client:
		return redis.NewClient(v.Options()), nil
	case *redis.ClusterClient:
		return redis.NewClusterClient(v.Options()), nil
	}
	return nil, fmt.Errorf("demo: cannot copy a %T", c)
}

// demoWorker is one simulated process of the leader scenario.
type demoWorker struct {
	name    string
	crashed atomic.Bool
	resign  chan struct{}
	e       *leader.Elector
	cancel  context.CancelFunc
	done    chan error
}

func demoLeader(ctx context.Context, d *demo) error {
	const (
		lease = 600 * time.Millisecond
		retry = 100 * time.Millisecond
		store = "{demo-leader}:store"
	)
	leaseKey, fenceKey := fencedKeys("demo-leader", "leader")
	type election struct {
		w     *demoWorker
		token int64
		at    time.Time
	}
	var (
		mu        sync.Mutex
		believing int // workers that currently believe they lead
		maxBelief int
		elected   = make(chan election, 16)
	)
	workers := map[string]*demoWorker{}
	for _, name := range []string{"worker-1", "worker-2", "worker-3"} {
		w := &demoWorker{name: name, resign: make(chan struct{}, 1), done: make(chan error, 1)}
		base := d.coord()
		// The worker's own client fails every command once it "crashed".
		client, err := cloneClient(base.Client())
		if err != nil {
			return err
		}
		defer client.Close()
		client.AddHook(cutHook{w})
		coord, err := coordination.New(client, coordination.WithKeyPrefix(d.prefix))
		if err != nil {
			return err
		}
		workerStore, err := fencing.NewGuarded(coord, store)
		if err != nil {
			return err
		}
		w.e, err = leader.New(coord, leaseKey, fenceKey, name,
			leader.WithLeaseDuration(lease), leader.WithRetryDelay(retry),
			leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				mu.Lock()
				believing++
				maxBelief = max(maxBelief, believing)
				mu.Unlock()
				defer func() {
					mu.Lock()
					believing--
					mu.Unlock()
				}()
				d.logf(name, "elected, fencing token %d", term.FencingToken())
				elected <- election{w, term.FencingToken(), time.Now()}
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return nil
					case <-w.resign:
						d.logf(name, "resigns")
						return nil
					case <-tick.C:
						if w.crashed.Load() {
							continue
						}
						_, _, _ = workerStore.Set(ctx, term.FencingToken(), []byte("written by "+name), 0)
					}
				}
			}),
			leader.OnRevoked(func(term *leader.Term) error {
				d.logf(name, "term %d over (%s)", term.FencingToken(), causeText(context.Cause(term.Context())))
				return nil
			}))
		if err != nil {
			return err
		}
		workers[name] = w
	}
	start := func(w *demoWorker) {
		rctx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		go func() { w.done <- w.e.Run(rctx) }()
	}
	defer func() {
		for _, w := range workers {
			w.cancel()
		}
		for _, w := range workers {
			if err := <-w.done; err != nil && !errors.Is(err, errCutOff) {
				d.check("leader "+w.name+" stopped cleanly", false, "%v", err)
			}
		}
	}()
	next := func() (election, error) {
		select {
		case e := <-elected:
			return e, nil
		case <-time.After(5 * time.Second):
			return election{}, errors.New("no leader elected within 5s")
		}
	}

	d.logf("demo", "three workers campaign (lease %v, retry delay %v)", lease, retry)
	for _, name := range []string{"worker-1", "worker-2", "worker-3"} {
		start(workers[name])
	}
	first, err := next()
	if err != nil {
		return err
	}
	time.Sleep(lease / 4)

	// 1. The leader crashes: it stops renewing and never releases.
	d.logf(first.w.name, "crashes (no more renewals, no release)")
	crashedAt := time.Now()
	first.w.crashed.Store(true)
	second, err := next()
	if err != nil {
		return err
	}
	took := second.at.Sub(crashedAt)
	d.timed("crashed leader replaced within lease + retry delay", true, took <= lease+retry+100*time.Millisecond,
		"%s took over %v after %s crashed (bound %v)", second.w.name, took.Round(time.Millisecond), first.w.name, lease+retry)
	time.Sleep(lease / 2)

	// 2. The new leader resigns cleanly: the lease is released at once.
	resignedAt := time.Now()
	second.w.resign <- struct{}{}
	third, err := next()
	if err != nil {
		return err
	}
	took = third.at.Sub(resignedAt)
	d.timed("successor of a resigned leader elected within about one retry delay", true, took <= retry+100*time.Millisecond,
		"%s elected %v after %s resigned (retry delay %v)", third.w.name, took.Round(time.Millisecond), second.w.name, retry)
	time.Sleep(250 * time.Millisecond) // the new leader writes

	// 3. The crashed leader wakes up (a GC pause, a partition healing) and
	// writes with its old token: the fenced store rejects it.
	fenced, err := fencing.NewGuarded(d.coord(), store)
	if err != nil {
		return err
	}
	ok, current, err := fenced.Set(ctx, first.token, []byte("late write by "+first.w.name), 0)
	if err != nil {
		return err
	}
	d.logf(first.w.name, "wakes up and writes with its old token %d: accepted=%v (store is at token %d)", first.token, ok, current)
	d.check("the fenced store rejects the old leader's late write", !ok && current >= third.token,
		"token %d rejected, store at %d", first.token, current)
	v, tok, _, err := fenced.Get(ctx)
	if err != nil {
		return err
	}
	d.logf("store", "holds %q (token %d)", v, tok)

	d.check("fencing tokens increase from term to term", first.token < second.token && second.token < third.token,
		"%d < %d < %d", first.token, second.token, third.token)
	mu.Lock()
	mb := maxBelief
	mu.Unlock()
	d.check("one leader at a time", mb == 1, "at most %d worker(s) believed they led at once", mb)
	info, err := leader.Get(ctx, d.coord(), leaseKey)
	if err != nil {
		return err
	}
	d.check("followers read the leader", info.Identity == third.w.name && info.FencingToken == third.token,
		"leader.Get reports %s with token %d", info.Identity, info.FencingToken)
	return nil
}

// causeText names why a term ended.
func causeText(cause error) string {
	switch {
	case errors.Is(cause, leader.ErrResigned):
		return "resigned"
	case errors.Is(cause, leader.ErrStopped):
		return "stopped"
	case errors.Is(cause, errCutOff):
		return "renewal impossible: " + errCutOff.Error()
	case errors.Is(cause, coordination.ErrLost):
		return "lease lost: " + strings.TrimPrefix(cause.Error(), coordination.ErrLost.Error()+": ")
	default:
		return fmt.Sprint(cause)
	}
}
