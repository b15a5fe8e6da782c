// Package waitloop is the one blocking-acquire loop of the library: try the
// atomic script; when contended, subscribe to the key's release channel
// first, then try again, then sleep until a notification, the holder's
// server-reported expiry or a periodic re-check, whichever comes first.
// Transient errors are retried with jittered backoff; terminal errors end
// the loop. It never sleeps in a fixed polling interval.
package waitloop

import (
	"context"
	"math/rand/v2"
	"time"

	coordination "github.com/coordkit/coordination"
)

// Attempt is the result of one try of the atomic script.
type Attempt struct {
	// Done is true when the caller got what it waited for.
	Done bool
	// RetryIn is when trying again may succeed without a notification: the
	// holder's remaining TTL as the server reported it. Zero or negative
	// means unknown (no expiry); the loop then relies on notifications and
	// the re-check period.
	RetryIn time.Duration
}

// Config tunes the loop. The zero value uses the defaults.
type Config struct {
	// Recheck caps every sleep, so a lost notification delays a waiter by at
	// most this long. Default 5s.
	Recheck time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff after
	// a transient error. Defaults 10ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// OnContended is called once per contended attempt (for metrics).
	OnContended func()
}

// Run calls try until it reports Done, returns a terminal error, or ctx
// ends. key is the unprefixed key whose release channel is watched.
//
// When ctx ends, Run returns coordination.GaveUp(ctx), which matches
// coordination.ErrNotAcquired and the context's cause. A terminal error from try is returned as is.
func Run(ctx context.Context, coord *coordination.Coordinator, key string, cfg Config, try func(context.Context) (Attempt, error)) error {
	if cfg.Recheck <= 0 {
		cfg.Recheck = 5 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}

	var (
		w        *coordination.Watch
		watched  bool // a Watch was attempted (it may have failed)
		failures int
		timer    *time.Timer
	)
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
			if !timer.Stop() {
				<-timer.C
			}
		case <-ctx.Done():
			if !timer.Stop() {
				<-timer.C
			}
			return giveUp(ctx)
		}
		return nil
	}

	for {
		if ctx.Err() != nil {
			return giveUp(ctx)
		}
		a, err := try(ctx)
		if err != nil {
			switch coordination.Classify(err) {
			case coordination.Canceled:
				if ctx.Err() != nil {
					return giveUp(ctx)
				}
				return err
			case coordination.Transient:
				failures++
				if err := sleep(backoff(cfg, failures)); err != nil {
					return err
				}
				continue
			default:
				return err
			}
		}
		failures = 0
		if a.Done {
			return nil
		}
		if cfg.OnContended != nil {
			cfg.OnContended()
		}
		if !watched {
			// Subscribe first, then try again at once: a release between the
			// failed attempt and the subscription is then never missed.
			watched = true
			var werr error
			w, werr = coord.Watch(ctx, key)
			if werr != nil {
				if ctx.Err() != nil {
					return giveUp(ctx)
				}
				coord.Logger().Warn("coordination: release notifications unavailable; waiting on expiry and re-checks",
					"error_class", coordination.Classify(werr).String())
			}
			continue
		}
		d := cfg.Recheck
		if w == nil || !w.Confirmed() {
			// No notifications (the subscription failed or is not
			// confirmed): re-check more often.
			d = min(d, 250*time.Millisecond)
		}
		if a.RetryIn > 0 && a.RetryIn < d {
			d = a.RetryIn
		}
		if err := sleep(d); err != nil {
			return err
		}
	}
}

func giveUp(ctx context.Context) error {
	return coordination.GaveUp(ctx)
}

func backoff(cfg Config, failures int) time.Duration {
	d := cfg.MinBackoff << min(failures-1, 16)
	if d > cfg.MaxBackoff || d <= 0 {
		d = cfg.MaxBackoff
	}
	// Full jitter in [d/2, d].
	return d/2 + rand.N(d/2+1)
}
