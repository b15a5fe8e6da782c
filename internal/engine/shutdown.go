package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
)

// errShutdown is the error of everything refused because the engine was
// shut down: it wraps [sentinel.ErrClosed].
var errShutdown = fmt.Errorf("%w: the coordinator was shut down", sentinel.ErrClosed)

// errLeaseShutdown is the cause of a held lease's context when its
// coordinator was shut down ([Engine.Shutdown]): it matches [sentinel.ErrLost] and
// [sentinel.ErrClosed]. The lease is not released; it ends on the server at its TTL.
var errLeaseShutdown error = &sentinel.LostError{Reason: "the coordinator was shut down; the lease is no longer renewed and ends at its TTL", Err: sentinel.ErrClosed}

// lifecycle is the shutdown state of an engine.
type lifecycle struct {
	closed atomic.Bool // Shutdown began; read on every operation

	mu      sync.Mutex
	closing chan struct{} // closed when Shutdown begins
	// abortCtx is the parent of every cleanup try: cancelled when
	// Shutdown's context ends before the cleanups did.
	abortCtx context.Context
	abort    context.CancelFunc
	bg       sync.WaitGroup // tracked background goroutines
	onClose  map[*closer]struct{}
	done     chan struct{} // closed when the first Shutdown returned
	result   error         // the first Shutdown's result, set before done

	abandoned atomic.Int64 // cleanups given up because Shutdown's ctx ended
}

type closer struct{ f func() }

func (l *lifecycle) init() {
	l.closing = make(chan struct{})
	l.done = make(chan struct{})
	l.abortCtx, l.abort = context.WithCancel(context.Background())
}

// closed returns an error wrapping [sentinel.ErrClosed] once [Engine.Shutdown] has
// begun, and nil before.
func (e *Engine) closed() error {
	if e.life.closed.Load() {
		return errShutdown
	}
	return nil
}

// closing returns a channel closed when [Engine.Shutdown] begins.
func (e *Engine) closing() <-chan struct{} { return e.life.closing }

// ClosedAny returns the Engine.closed error of the first engine of es
// that was shut down, or nil.
func ClosedAny(es []*Engine) error {
	for _, e := range es {
		if err := e.closed(); err != nil {
			return err
		}
	}
	return nil
}

// track counts one background goroutine of e, which [Engine.Shutdown]
// waits for: it reports false, counting nothing, once Shutdown has begun
// (the goroutine must then not start). The goroutine must call
// Engine.untrack when it ends, and must end promptly once Shutdown began
// (see [Engine.OnShutdown] and Engine.closing).
func (e *Engine) track() bool {
	l := &e.life
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	l.bg.Add(1)
	return true
}

// untrack ends a goroutine counted by Engine.track.
func (e *Engine) untrack() { e.life.bg.Done() }

// OnShutdown registers f to be called by [Engine.Shutdown], synchronously,
// before Shutdown waits for the tracked goroutines (a held lease's
// keep-alive is stopped and its context cancelled so). It returns the
// function that unregisters f (f is then not called, unless Shutdown has
// already taken it), or ok false when Shutdown has begun: f is not
// registered and the caller must act as if it had been called. f must not
// call Shutdown.
func (e *Engine) OnShutdown(f func()) (stop func(), ok bool) {
	l := &e.life
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return func() {}, false
	}
	c := &closer{f: f}
	if l.onClose == nil {
		l.onClose = map[*closer]struct{}{}
	}
	l.onClose[c] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.onClose, c)
		l.mu.Unlock()
	}, true
}

// Shutdown ends the engine's background work and refuses every later
// operation (with an error wrapping [sentinel.ErrClosed], sending nothing):
//
//   - every blocked waiter ([Engine.Wait], [Engine.Watch]) returns an
//     error wrapping sentinel.ErrClosed;
//   - the functions registered with [Engine.OnShutdown] run (held leases
//     stop their keep-alives and end locally, with [errLeaseShutdown]);
//   - the shared Pub/Sub connection is closed;
//   - each running background cleanup tries again at once and goes on
//     retrying transient errors until it succeeds, fails terminally, its
//     own limit passes, or ctx ends: then it is abandoned (counted and
//     logged, reason "shutdown");
//   - Shutdown waits for every tracked goroutine to end (Engine.track),
//     a try in flight included (its context is cancelled when ctx ends; a
//     go-redis call on an unresponsive server ends by the client's read
//     and write timeouts, or with ContextTimeoutEnabled by the try's own
//     deadline, at most 5 s).
//
// It returns nil, or, when ctx ended before the cleanups did, an error
// wrapping ctx's error that says how many were abandoned. A later call
// returns the first call's result once that call has returned (or ctx's
// error if ctx ends first). It is safe for concurrent use. The client is
// never closed.
func (e *Engine) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return check.InvalidArgument("ctx", "must not be nil")
	}
	l := &e.life
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		select {
		case <-l.done:
			return l.result
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.closed.Store(true)
	close(l.closing)
	fs := make([]*closer, 0, len(l.onClose))
	for c := range l.onClose {
		fs = append(fs, c)
	}
	l.onClose = nil
	l.mu.Unlock()

	for _, c := range fs {
		c.f()
	}
	e.hub.close()

	waited := make(chan struct{})
	go func() {
		l.bg.Wait()
		close(waited)
	}()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		l.abort()
		<-waited
		if n := l.abandoned.Load(); n > 0 {
			noun := "cleanups"
			if n == 1 {
				noun = "cleanup"
			}
			err = fmt.Errorf("coordination: shutdown: %d background %s abandoned (what each would have removed ends at its TTL): %w", n, noun, context.Cause(ctx))
		}
	}
	l.abort()
	l.result = err
	close(l.done)
	return err
}
