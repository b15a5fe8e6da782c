package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/redlock"
)

// extraNodes makes, for a coordinator of the contract suite, the two other
// nodes of a three-node group: new clients of the same backend with their
// own key prefixes (so each "node" has its own keys), the second one slowed
// by 100 ms so that the suite's node (node 0) is always in the quorum that
// decides. They are closed when TestContract ends.
type extraNodes struct {
	mu      sync.Mutex
	clients []redis.UniversalClient
}

// slow delays every command by d.
type slow struct{ d time.Duration }

func (slow) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s slow) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(s.d)
		return next(ctx, cmd)
	}
}
func (s slow) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (x *extraNodes) clone(c redis.UniversalClient) redis.UniversalClient {
	var out redis.UniversalClient
	switch v := c.(type) {
	case *redis.Client:
		out = redis.NewClient(v.Options())
	case *redis.ClusterClient:
		out = redis.NewClusterClient(v.Options())
	default:
		panic(fmt.Sprintf("unexpected client %T", c))
	}
	x.mu.Lock()
	x.clients = append(x.clients, out)
	x.mu.Unlock()
	return out
}

func (x *extraNodes) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range x.clients {
		c.Close()
	}
}

// group returns a group over c and two extra nodes (cached per c).
func (x *extraNodes) coords(c *coordination.Coordinator) ([]*coordination.Coordinator, error) {
	if c == nil {
		return []*coordination.Coordinator{nil, nil, nil}, nil
	}
	out := []*coordination.Coordinator{c}
	for i := 1; i <= 2; i++ {
		cl := x.clone(c.Client())
		if i == 2 {
			cl.AddHook(slow{100 * time.Millisecond})
		}
		n, err := coordination.New(cl, coordination.WithKeyPrefix(fmt.Sprintf("%sn%d:", prefixOf(c), i)))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// The contract suite on a three-node group whose node 0 is the suite's
// coordinator: acquire, a contended try, a blocking Acquire giving up,
// refresh, release; each one script per node, admitted once.
func TestContract(t *testing.T) {
	x := &extraNodes{}
	defer x.close()
	var mu sync.Mutex
	groups := map[*coordination.Coordinator]*redlock.Group{}
	group := func(c *coordination.Coordinator) (*redlock.Group, error) {
		mu.Lock()
		defer mu.Unlock()
		if g := groups[c]; g != nil && c != nil {
			return g, nil
		}
		coords, err := x.coords(c)
		if err != nil {
			return nil, err
		}
		// A generous node timeout: no step of the suite is about it, and a
		// loaded machine must not turn a late node into a failed one.
		g, err := redlock.New(coords, redlock.WithSameServerForTest(), redlock.WithNodeTimeout(5*time.Second))
		if err == nil {
			groups[c] = g
		}
		return g, err
	}
	bad := func(call func(g *redlock.Group) error) func(context.Context, *coordination.Coordinator) error {
		return func(_ context.Context, c *coordination.Coordinator) error {
			g, err := group(c)
			if err != nil {
				return err
			}
			return call(g)
		}
	}
	ctx := context.Background()
	contract.Run(t, contract.Spec{
		Primitive: "redlock",
		Keys:      func(name string) []string { return []string{name} },
		Metrics:   []string{"coordination.redlock.acquire_latency"},
		Scenario: func(name string) []contract.Step {
			var l *redlock.Lock
			return []contract.Step{
				{Name: "TryAcquire", Op: hooks.RedlockAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					g, err := group(c)
					if err == nil {
						l, err = g.TryAcquire(ctx, name, time.Minute)
					}
					return err
				}},
				{Name: "contended TryAcquire", Op: hooks.RedlockAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					g, err := group(c)
					if err != nil {
						return err
					}
					if _, err := g.TryAcquire(ctx, name, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
						return fmt.Errorf("want ErrNotAcquired, got %v", err)
					}
					return nil
				}},
				{Name: "Acquire giving up", Op: hooks.RedlockAcquire, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					g, err := group(c)
					if err != nil {
						return err
					}
					// Long enough for a round to be answered on a loaded
					// machine (150 ms was not: "Redis answered no attempt").
					ctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					if _, err := g.Acquire(ctx, name, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}},
				{Name: "Refresh", Op: hooks.RedlockRenew, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := l.Refresh(ctx, time.Minute)
					if err == nil && !ok {
						err = errors.New("Refresh = false for the holder")
					}
					return err
				}},
				{Name: "Release", Op: hooks.RedlockRelease, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := l.Release(ctx)
					if err == nil && out != coordination.Released {
						err = fmt.Errorf("Release = %v, want released", out)
					}
					return err
				}},
			}
		},
		BadInputs: []contract.BadInput{
			{Arg: "key", Op: hooks.RedlockAcquire, Call: bad(func(g *redlock.Group) error { _, err := g.TryAcquire(ctx, "", time.Minute); return err })},
			{Arg: "ttl", Op: hooks.RedlockAcquire, Call: bad(func(g *redlock.Group) error { _, err := g.TryAcquire(ctx, "k", 0); return err })},
			{Arg: "ttl", Op: hooks.RedlockAcquire, Call: bad(func(g *redlock.Group) error { _, err := g.Acquire(ctx, "k", time.Microsecond); return err })},
		},
		// Node 0's reply is lost, node 1 grants, node 2 (another owner's)
		// refuses: no quorum for want of node 0, an ambiguous QuorumError,
		// and node 0's token is removed by the background cleanup, which
		// leaves its tombstone there (a free lock).
		LostReply: &contract.LostReply{
			Setup: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				coords, err := x.coords(c)
				if err != nil {
					return err
				}
				other, err := engine.NewToken() // another owner's token
				if err != nil {
					return err
				}
				return coords[2].Client().Set(ctx, prefixOf(coords[2])+name, other, time.Minute).Err()
			},
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				g, err := group(c)
				if err != nil {
					return err
				}
				_, err = g.TryAcquire(ctx, name, time.Minute)
				var qe *redlock.QuorumError
				if !errors.As(err, &qe) {
					return fmt.Errorf("want a QuorumError, got %v", err)
				}
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				v, err := raw.Get(ctx, key(name)).Result()
				if errors.Is(err, redis.Nil) {
					return true, nil
				}
				return err == nil && lockcore.IsTombstone(v), err
			},
		},
	})
}

// prefixOf returns c's key prefix.
func prefixOf(c *coordination.Coordinator) string {
	e, err := engine.Of(c)
	if err != nil {
		panic(err)
	}
	return e.Prefix()
}
