package leader

import (
	"fmt"
	"net/http"
	"time"

	"github.com/coordkit/coordination/internal/check"
)

// HealthHandler returns an http.Handler for a liveness probe of this
// elector, in the manner of client-go's leader-election HealthzAdaptor. A
// GET or HEAD is answered 200 OK with the body "ok\n" while Run runs and
// none of these holds, else 503 Service Unavailable with a one-line
// reason (text/plain, no identity, key or endpoint):
//
//   - "not running": Run has not been called, or has returned;
//   - "renewal overdue by D": the elector leads and its lease's last
//     successful renewal is more than half a lease duration plus tolerance
//     old (the leader renews every half lease duration: renewals are
//     failing or stalled; the term itself ends when the lease's local
//     deadline passes);
//   - "OnElected outlived its term by D": the term ended more than
//     tolerance ago and OnElected has not returned (the elector waits at
//     most the drain timeout, see [WithDrainTimeout], then Run returns).
//
// Other methods are answered 405 Method Not Allowed. Give a tolerance
// above a few round trips to Redis: a renewal in flight makes the lease's
// age pass half its duration briefly. The handler does no I/O; it is safe
// for concurrent use and may be created before Run is called.
//
// Errors: coordination.ErrInvalidArgument naming "elector" (nil) or
// "tolerance" (negative).
func (e *Elector) HealthHandler(tolerance time.Duration) (http.Handler, error) {
	if e == nil || e.e == nil {
		return nil, check.InvalidArgument("elector", "must not be nil; use leader.New")
	}
	if tolerance < 0 {
		return nil, check.InvalidArgument("tolerance", "must not be negative, got %v", tolerance)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if reason := e.unhealthy(tolerance); reason != "" {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	}), nil
}

// unhealthy returns why the elector is unhealthy, or "".
func (e *Elector) unhealthy(tolerance time.Duration) string {
	if !e.running.Load() {
		return "not running"
	}
	if ended := e.draining.Load(); ended != 0 {
		if over := time.Since(time.Unix(0, ended)); over > tolerance {
			return fmt.Sprintf("OnElected outlived its term by %v", over.Round(time.Millisecond))
		}
	}
	if t := e.Current(); t != nil {
		// The lease's age is its duration less what is left of it. (A term
		// past its local deadline is over: Current is nil then, or its
		// Remaining is 0 and the term ends now.)
		if left := t.h.Remaining(); left == 0 {
			return ""
		} else if over := e.lease/2 - left; over > tolerance {
			return fmt.Sprintf("renewal overdue by %v", over.Round(time.Millisecond))
		}
	}
	return ""
}
