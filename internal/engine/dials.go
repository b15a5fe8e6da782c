package engine

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// dialWatch records the outcome of every dial of a client, through a
// go-redis dial hook ([Engine.WatchDials]): go-redis dials in a goroutine
// of its own, detached from the caller's context, and retries a failed
// dial (DialerRetries, 5 by default, with a backoff between them) and then
// the command (MaxRetries), so a caller whose context ends first gets the
// context's error, never the dial error that kept it waiting.
type dialWatch struct {
	mu    sync.Mutex
	okAt  time.Time // the last dial that connected
	err   error     // the last dial that failed, at errAt
	errAt time.Time
}

// DialHook records the outcome of each dial; the connection and the error
// are handed on unchanged.
func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		now := time.Now()
		w.mu.Lock()
		if err != nil {
			w.err, w.errAt = err, now
		} else {
			w.okAt = now
		}
		w.mu.Unlock()
		return conn, err
	}
}

// ProcessHook returns nil: commands are not wrapped.
func (*dialWatch) ProcessHook(redis.ProcessHook) redis.ProcessHook { return nil }

// ProcessPipelineHook returns nil: pipelines are not wrapped.
func (*dialWatch) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return nil
}

// WatchDials makes the engine record the outcome of its client's dials, so
// that [Engine.DialFailure] can tell why a call that has not ended is
// waiting. It adds one go-redis hook to the client, on its first call for
// this engine (later calls do nothing); the hook wraps dials only (commands
// and pipelines are not wrapped) and changes nothing of them. It sends
// nothing and is safe for concurrent use.
func (e *Engine) WatchDials() {
	e.dials.once.Do(func() {
		w := &dialWatch{}
		e.client.AddHook(w)
		e.dials.w.Store(w)
	})
}

// DialFailure returns the error of the last dial of the engine's client
// when a call begun at since, whose context ended (or that is still
// running), was kept waiting by dials that fail: a dial failed with a
// *net.OpError (Op "dial": a refused connection, a name that does not
// resolve, a dial timeout) at or after since, no dial has connected since
// since, and the client holds no connection now (main and pipeline pools).
// No connection existed for the call then, so it wrote nothing (the one
// exception is [IsAmbiguous]'s: a connection that wrote it broke, and
// go-redis' re-send could not dial). It returns nil otherwise, and before
// [Engine.WatchDials]. The error is the dial's (IsAmbiguous is false for
// it; Classify says Transient).
func (e *Engine) DialFailure(since time.Time) error {
	w := e.dials.w.Load()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	err, errAt, okAt := w.err, w.errAt, w.okAt
	w.mu.Unlock()
	var op *net.OpError
	if err == nil || errAt.Before(since) || !okAt.Before(since) || !errors.As(err, &op) || op.Op != "dial" {
		return nil
	}
	if s := e.client.PoolStats(); s == nil || s.TotalConns > 0 || s.PipelineStats != nil && s.PipelineStats.TotalConns > 0 {
		return nil
	}
	return err
}
