package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/instrument"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// CleanupLimit bounds how long one background cleanup keeps retrying.
const CleanupLimit = time.Minute

// maxCleanups bounds the background cleanups one engine runs at once:
// during an outage every failed operation may want one. Past the bound a
// cleanup is given up at once (counted, reason "overflow"): its lease ends
// at its TTL.
const maxCleanups = 1024

// allCleanups counts the background cleanups of every engine of the
// process; see [RunningCleanups].
var allCleanups atomic.Int64

// RunningCleanups returns the number of background cleanups running now in
// the whole process, across engines: the test harness waits for it to
// reach 0 before its goroutine-leak check, since each cleanup is bounded
// (by its limit, and by its next try once its client is closed, which
// fails terminally with redis.ErrClosed).
func RunningCleanups() int { return int(allCleanups.Load()) }

type cleanups struct {
	mu      sync.Mutex
	running int
	attrs   map[[2]string]metric.MeasurementOption
}

// Cleanup runs fn in the background until it succeeds, fails terminally,
// limit passes (at most [CleanupLimit]; 0 means CleanupLimit) or ctx-less
// retries run out, retrying transient errors with jittered backoff; each try
// is bounded by 5 s; its script calls never wait for replica
// acknowledgements (see [Config.ReplicaAcks]). It is how every primitive undoes what an ambiguous
// operation may have left, and how a release that failed is retried. When
// it gives up it counts coordination.cleanup.abandoned{stage, reason} and
// logs a warning (never keys or tokens). stage names the operation, e.g.
// "acquire" or "release".
//
// [Engine.Shutdown] gives a running cleanup a last chance: it tries again
// at once, and is abandoned (reason "shutdown") when Shutdown's context
// ends first. A cleanup asked for once Shutdown has begun is abandoned at
// once (reason "shutdown"): nothing is sent after Shutdown but the tries
// of the cleanups already running.
func (e *Engine) Cleanup(stage string, limit time.Duration, fn func(context.Context) error) {
	if limit <= 0 || limit > CleanupLimit {
		limit = CleanupLimit
	}
	e.cleanup.mu.Lock()
	if e.cleanup.running >= maxCleanups {
		e.cleanup.mu.Unlock()
		e.abandon(stage, "overflow", nil)
		return
	}
	if !e.track() {
		e.cleanup.mu.Unlock()
		e.abandon(stage, "shutdown", nil)
		return
	}
	e.cleanup.running++
	e.cleanup.mu.Unlock()
	allCleanups.Add(1)
	go func() {
		defer func() {
			e.cleanup.mu.Lock()
			e.cleanup.running--
			e.cleanup.mu.Unlock()
			allCleanups.Add(-1)
			e.untrack()
		}()
		deadline := time.Now().Add(limit)
		delay := 50 * time.Millisecond
		closing := e.life.closing // nil once Shutdown's last chance began
		aborted := e.life.abortCtx.Done()
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			ctx, cancel := context.WithTimeout(e.life.abortCtx, min(5*time.Second, max(time.Until(deadline), time.Millisecond)))
			err := fn(withoutAcks(ctx))
			cancel()
			if err == nil {
				return
			}
			if err == errHeld {
				// Another owner holds the lease ([Engine.Abandon]): not a
				// failure; tried again soon, but not past the deadline nor
				// once Shutdown began.
				if closing == nil || e.life.abortCtx.Err() != nil || time.Now().Add(delay).After(deadline) {
					return
				}
			} else {
				class := Classify(err)
				if e.life.abortCtx.Err() != nil {
					e.abandonAtShutdown(stage, err)
					return
				}
				if class == Terminal {
					e.abandon(stage, "terminal_error", err)
					return
				}
				if time.Now().Add(delay).After(deadline) {
					e.abandon(stage, "deadline", err)
					return
				}
			}
			d := delay/2 + rand.N(delay/2+1)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-closing:
				// Shutdown began: the last chance starts now.
				closing = nil
				timer.Stop()
			case <-aborted:
				e.abandonAtShutdown(stage, err)
				return
			}
			if err == errHeld {
				delay = min(delay*2, time.Second)
			} else {
				delay = min(delay*2, 5*time.Second)
			}
		}
	}()
}

// errHeld is a try of [Engine.Abandon]'s cleanup that found the lease
// held by another owner: no tombstone fits beside it yet.
var errHeld = errors.New("engine: the lease is held by another owner")

// Abandon undoes in the background what an ambiguous acquisition may have
// left, with its kind's Abandon script s ([LeaseKind.Abandon]) run on k
// with args (the acquisition's id) and the tombstone's life in ms,
// [AbandonFor](ttl); as [Engine.Cleanup] ("acquire"), retrying transient
// errors for that life. A single-holder kind's script answers
// decode.NotOwned while another owner holds the lease: its key has room
// for no tombstone beside a holder, and the acquisition's request, if it
// is still on its way, would take the lease once that owner lets go. So
// s runs again, after 50 ms and then at most a second apart, until the
// lease is free (the tombstone is written) or the life has passed: a late
// request that lands before the next try is ended by it (the token, then
// holding the lease, is released), and one that lands after is refused.
// Giving up while another owner still holds the lease is neither counted
// nor logged (nothing of the acquisition is known to be there), and
// [Engine.Shutdown]'s last chance does not wait for it.
func (e *Engine) Abandon(s *Script[decode.Outcome], k Keys, ttl time.Duration, args ...any) {
	life := AbandonFor(ttl)
	args = append(args[:len(args):len(args)], life.Milliseconds())
	e.Cleanup("acquire", life, func(ctx context.Context) error {
		out, err := s.Run(ctx, e, k, args...)
		if err == nil && out == decode.NotOwned {
			return errHeld
		}
		return err
	})
}

// abandonAtShutdown gives up a cleanup because Shutdown's context ended,
// counting it for Shutdown's result.
func (e *Engine) abandonAtShutdown(stage string, err error) {
	e.life.abandoned.Add(1)
	e.abandon(stage, "shutdown", err)
}

// Cleanups returns the number of background cleanups running now.
func (e *Engine) Cleanups() int {
	e.cleanup.mu.Lock()
	defer e.cleanup.mu.Unlock()
	return e.cleanup.running
}

func (e *Engine) abandon(stage, reason string, err error) {
	e.cleanup.mu.Lock()
	if e.cleanup.attrs == nil {
		e.cleanup.attrs = map[[2]string]metric.MeasurementOption{}
	}
	k := [2]string{stage, reason}
	a, ok := e.cleanup.attrs[k]
	if !ok {
		a = instrument.Attrs(attribute.String("stage", stage), attribute.String("reason", reason))
		e.cleanup.attrs[k] = a
	}
	e.cleanup.mu.Unlock()
	e.Count(cleanupAbandoned, a)
	args := []any{"stage", stage, "reason", reason}
	if err != nil {
		args = append(args, "error", Describe(err))
	}
	e.logger.Warn("coordination: cleanup abandoned; what it would have removed ends at its TTL", args...)
}
