package engine

import (
	"context"
	"time"

	"github.com/coordkit/coordination/internal/timing"
)

// Attempt is the result of one try of a wait loop.
type Attempt struct {
	// Done is true when the caller got what it waited for (or a final
	// answer): the loop returns nil.
	Done bool
	// RetryIn is when trying again may succeed without a notification: the
	// holder's remaining TTL, a retry time the server computed. Zero or negative
	// means unknown; the loop then relies on notifications, wake-ups and
	// the re-check period.
	RetryIn time.Duration
	// Failed, when not nil (and Done false), is the error of an attempt
	// that no answer decided: an outage, such as a Redlock round that failed
	// nodes left without a quorum. A try that keeps its own retry time
	// (RetryIn; the loop's backoff when zero) reports it here rather than
	// as its error; the loop then counts the attempt as failed, not as
	// answered, exactly as a transient error, so that giving up names
	// Failed and does not match ErrNotAcquired. Nothing subscribes after
	// such an attempt, and OnContended is not called.
	Failed error
}

// WaitConfig tunes [Engine.Wait]. The zero value waits with the defaults
// and no notifications.
type WaitConfig struct {
	// Key is the prefixed key whose release channel the loop subscribes to
	// after the first unsuccessful attempt; empty means no subscription.
	Key string
	// Part, when not empty, narrows the subscription to one part of Key
	// (a hash field's lease: "\x00" + the field), as [Engine.watchPart].
	Part string
	// Only, when not empty, makes the loop wake only on notifications
	// whose message is Only (a queued waiter's owner token, which a
	// first-in first-out release publishes for the one waiter it wakes);
	// other notifications on Key are ignored.
	Only string
	// Recheck caps every sleep, so a lost notification delays a waiter by at
	// most this long. Default 5 s; 250 ms while no subscription is
	// confirmed.
	Recheck time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff after
	// a transient error. Defaults 10 ms and 1 s.
	MinBackoff, MaxBackoff time.Duration
	// FirstIn delays the first attempt (a queued request that already knows
	// its retry time). Wake ends the delay early.
	FirstIn time.Duration
	// Wake, when not nil, ends a sleep early (a local release, a change of
	// a queue's head).
	Wake <-chan struct{}
	// OnContended is called after each unsuccessful attempt (for metrics).
	OnContended func()
}

// DefaultRecheck is the default re-check period of every blocking wait.
const DefaultRecheck = 5 * time.Second

// unconfirmedRecheck caps sleeps while no subscription is confirmed.
const unconfirmedRecheck = 250 * time.Millisecond

// Wait is the one blocking loop of the library: it calls try until try
// reports Done, returns an error that is not transient, or ctx ends. After
// the first unsuccessful attempt it subscribes to cfg.Key's release channel
// and tries again at once (a release in between is never missed), then
// sleeps until a notification, cfg.Wake, the attempt's RetryIn or the
// re-check period, whichever comes first. Transient errors ([Classify]) are
// retried with jittered exponential backoff. It never polls at a fixed
// short period.
//
// When ctx ends it returns [gaveUp](ctx) if Redis answered the last
// attempt that ended (the lease was held, the permits were taken).
// Otherwise, when that attempt failed with a transient error (Redis
// unreachable, a failover in progress) or Redis answered no attempt at all
// (each was cut by ctx: go-redis retrying a dial returns ctx's error bare),
// it returns an error wrapping ctx's cause and that failure but not
// ErrNotAcquired: an outage is not contention, and code that reads
// ErrNotAcquired as "another holder has it" must not mistake one for the
// other. When ctx ended before the first attempt (nothing was asked,
// nothing failed) it returns ctx's cause alone ([Ended]), as an operation
// that sends one command does. Each give-up error classifies as a
// cancellation ([Classify]), whatever ctx's cause. A terminal error from try is returned as is. Once [Engine.Shutdown]
// has begun it returns an error wrapping [sentinel.ErrClosed], at once
// when sleeping. The time it takes adds to the wait time of the span of
// ctx's operation, when it records one.
func (e *Engine) Wait(ctx context.Context, cfg WaitConfig, try func(context.Context) (Attempt, error)) error {
	if done := waiting(ctx); done != nil {
		defer done()
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}
	var (
		w        *Watch
		watched  bool
		failures int
		last     error // the last attempt's transient error; nil after an answer
		tried    bool  // an attempt was made
		answered bool  // Redis answered an attempt
		timer    *time.Timer
	)
	gaveUp := func() error {
		switch {
		case !tried:
			return Ended(ctx)
		case last != nil || !answered:
			return &outageError{cause: Ended(ctx), last: last}
		}
		return gaveUp(ctx)
	}
	defer func() {
		w.Close()
		if timer != nil {
			timer.Stop()
		}
	}()
	sleep := func(d time.Duration) error {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		var notify <-chan struct{}
		if w != nil {
			notify = w.C()
		}
		select {
		case <-timer.C:
		case <-notify:
			timer.Stop()
		case <-cfg.Wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return gaveUp()
		case <-e.life.closing:
			timer.Stop()
			return errShutdown
		}
		return nil
	}
	if cfg.FirstIn > 0 {
		if err := sleep(cfg.FirstIn); err != nil {
			return err
		}
	}
	for {
		if ctx.Err() != nil {
			return gaveUp()
		}
		if e.life.closed.Load() {
			return errShutdown
		}
		tried = true
		a, err := try(ctx)
		if err != nil {
			switch Classify(err) {
			case Canceled:
				if ctx.Err() != nil {
					return gaveUp()
				}
				return err
			case Transient:
				failures++
				last = err
				if err := sleep(timing.Backoff(failures, cfg.MinBackoff, cfg.MaxBackoff)); err != nil {
					return err
				}
				continue
			default:
				return err
			}
		}
		if a.Done {
			return nil
		}
		if a.Failed != nil {
			// Failed like a transient error, at the try's own pace.
			failures++
			last = a.Failed
			d := a.RetryIn
			if d <= 0 {
				d = timing.Backoff(failures, cfg.MinBackoff, cfg.MaxBackoff)
			}
			if err := sleep(d); err != nil {
				return err
			}
			continue
		}
		failures, last, answered = 0, nil, true
		if cfg.OnContended != nil {
			cfg.OnContended()
		}
		if !watched && cfg.Key != "" {
			// Subscribe first, then try again at once.
			watched = true
			var werr error
			if w, werr = e.watchFor(ctx, cfg.Key, cfg.Part, cfg.Only); werr != nil {
				if ctx.Err() != nil {
					return gaveUp()
				}
				if e.life.closed.Load() {
					return errShutdown
				}
				e.logger.Warn("coordination: release notifications unavailable; waiting on expiry and re-checks",
					"error", Describe(werr))
			}
			continue
		}
		d := cfg.Recheck
		if cfg.Key != "" && (w == nil || !w.confirmed()) {
			d = min(d, unconfirmedRecheck)
		}
		if a.RetryIn > 0 && a.RetryIn < d {
			d = a.RetryIn
		}
		if err := sleep(d); err != nil {
			return err
		}
	}
}

// outageError is the error of a blocking wait whose context ended while
// Redis was failing or had answered nothing: it wraps the context's cause
// ([Ended]: a cancellation for Classify, whatever the cause) and the last
// attempt's transient error (nil when every attempt was cut by
// the context), and reads "CAUSE; the last attempt failed: ERR" or "CAUSE;
// Redis answered no attempt".
type outageError struct{ cause, last error }

// Error returns the error's message.
func (e *outageError) Error() string {
	if e.last == nil {
		return e.cause.Error() + "; Redis answered no attempt"
	}
	return e.cause.Error() + "; the last attempt failed: " + e.last.Error()
}

// Unwrap returns the context's cause and the last attempt's error, for
// errors.Is and errors.As.
func (e *outageError) Unwrap() []error {
	if e.last == nil {
		return []error{e.cause}
	}
	return []error{e.cause, e.last}
}
