package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/redis/go-redis/v9"
)

// replicaAcks is the coordinator's WAIT setting: n replicas (0: off) within
// timeout.
type replicaAcks struct {
	n       int
	timeout time.Duration
}

// noAcks marks the context of a background cleanup: its script calls skip
// the WAIT. A cleanup only removes what an operation may have left; its
// loss in a failover delays the next holder until the lease's TTL, as
// without acknowledgements, and waiting for replicas that are gone would
// keep it retrying for a minute.
type noAcks struct{}

func withoutAcks(ctx context.Context) context.Context { return context.WithValue(ctx, noAcks{}, true) }

// notReplicatedError is a script call that ran on the primary but whose
// writes fewer than the required replicas acknowledged in time.
type notReplicatedError struct {
	got, want int64
}

// Error returns the error's message.
func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("%v: %d of %d replicas acknowledged the write in time", sentinel.ErrNotReplicated, e.got, e.want)
}

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *notReplicatedError) Unwrap() error { return sentinel.ErrNotReplicated }

// runAcked sends cmd followed by WAIT in one pipeline on one
// connection to the server of the command's first key (at keyPos, or
// args[1] when keyPos is 0): one round trip, and the WAIT counts the
// acknowledgements of exactly this connection's writes. It returns the
// command's reply (redis.Nil for a nil reply) once enough replicas
// acknowledged, an error wrapping sentinel.ErrNotReplicated when fewer did within
// the timeout, and the command's error reply (NOSCRIPT included: the
// caller sends EVAL, acknowledged the same way) unchanged.
func (e *Engine) runAcked(ctx context.Context, cmd *sendCmd, keyPos int8) (any, error) {
	args := cmd.Args()
	pos := int(keyPos)
	if pos == 0 {
		pos = 1
	}
	key := ""
	if pos < len(args) {
		key = fmt.Sprint(args[pos])
	}
	for redirects := 0; ; redirects++ {
		c, err := e.nodeFor(ctx, key)
		if err != nil {
			return nil, err
		}
		v, err := e.pipelineAcked(ctx, c, cmd)
		cc, cluster := e.client.(*redis.ClusterClient)
		if cluster && redirects < 5 && err != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
			// The slot moved (a failover or a resharding): go-redis
			// reloads the layout in the background; send again to the
			// slot's new primary once it has.
			cc.ReloadState(ctx)
			select {
			case <-time.After(time.Duration(25<<redirects) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		return v, err
	}
}

// nodeFor returns the client of the one server key lives on.
func (e *Engine) nodeFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := e.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		if key == "" {
			return nil, check.InvalidArgument("keys", "replica acknowledgements need a key to find the server")
		}
		return c.MasterForKey(ctx, key)
	}
	return nil, check.InvalidArgument("client", "replica acknowledgements need a *redis.Client or *redis.ClusterClient")
}

func (e *Engine) pipelineAcked(ctx context.Context, c *redis.Client, run *sendCmd) (any, error) {
	var wait *redis.Cmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, run)
		wait = p.Do(ctx, "WAIT", e.acks.n, e.acks.timeout.Milliseconds())
		return nil
	})
	v, err := run.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return v, err // the command's error reply, or the pipeline's failure
	}
	n, werr := wait.Int64()
	if werr != nil {
		return nil, werr
	}
	if n < int64(e.acks.n) {
		return nil, &notReplicatedError{got: n, want: int64(e.acks.n)}
	}
	return v, err
}
