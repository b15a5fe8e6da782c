package lock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// replyError is an error reply from the server, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Errors of the lock's operations name the operation and the key as the
// caller gave it (never the prefix or the token), and wrap what go-redis
// returned: errors.Is and errors.As reach the sentinel, the *net.OpError,
// the context error and the server's reply (classified as before).
func TestErrorsNameOperationAndKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		clean := func(t *testing.T, err error, want string) {
			t.Helper()
			if err == nil || err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if err != nil && strings.Contains(err.Error(), b.Prefix()) {
				t.Errorf("error %q names the coordinator's prefix", err)
			}
		}

		// A key of another type.
		if err := b.Admin(t).HSet(ctx, b.Key("jobs:nightly"), "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		_, err = tryAcquire(ctx, coord, "jobs:nightly", time.Minute)
		clean(t, err, `coordination: lock acquire "jobs:nightly": key holds the wrong Redis type (COORD_WRONGTYPE)`)
		if !errors.Is(err, coordination.ErrBadState) || engine.Classify(err) != engine.Terminal {
			t.Errorf("wrong type: %v does not match ErrBadState, or is not terminal", err)
		}
		_, err = acquire(ctx, coord, "jobs:nightly", time.Minute)
		clean(t, err, `coordination: lock acquire "jobs:nightly": key holds the wrong Redis type (COORD_WRONGTYPE)`)

		// A network error, a server's NOPERM reply and a cancelled context,
		// on the first attempt (SET) and on the acquire script.
		dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		for _, c := range []struct {
			name  string
			fault testharness.Fault
			want  string
			check func(error) bool
		}{
			{"network", testharness.Fault{Command: "set", Err: dial}, `coordination: lock acquire "k1": dial tcp: connection refused`,
				func(err error) bool {
					var op *net.OpError
					return errors.As(err, &op) && op.Op == "dial" && coordination.IsTransient(err)
				}},
			{"noperm", testharness.Fault{Command: "set", Err: replyError("NOPERM User u has no permissions to run the 'set' command")},
				`coordination: lock acquire "k1": NOPERM User u has no permissions to run the 'set' command`,
				func(err error) bool {
					var re redis.Error
					return errors.As(err, &re) && engine.Classify(err) == engine.Terminal && !coordination.IsAmbiguous(err)
				}},
			{"canceled", testharness.Fault{Command: "set", Err: context.Canceled}, `coordination: lock acquire "k1": context canceled`,
				func(err error) bool {
					return errors.Is(err, context.Canceled) && engine.Classify(err) == engine.Canceled
				}},
		} {
			t.Run(c.name, func(t *testing.T) {
				faults.Add(c.fault)
				_, err := tryAcquire(ctx, coord, "k1", time.Minute)
				faults.Clear()
				clean(t, err, c.want)
				if !c.check(err) {
					t.Errorf("%v: errors.Is/As or classification lost", err)
				}
			})
		}

		// A held lock's refresh and release, once the background release
		// of the cancelled acquisition is done (it runs the same script).
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); e.Cleanups() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		l, err := tryAcquire(ctx, coord, "held", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		faults.Add(testharness.Fault{Err: replyError("NOPERM User u has no permissions to run the 'evalsha' command")})
		_, err = l.Refresh(ctx, time.Minute)
		clean(t, err, `coordination: lock renew "held": NOPERM User u has no permissions to run the 'evalsha' command`)
		faults.Add(testharness.Fault{Err: replyError("NOPERM User u has no permissions to run the 'evalsha' command")})
		out, err := l.Release(ctx)
		clean(t, err, `coordination: lock release "held": NOPERM User u has no permissions to run the 'evalsha' command`)
		if out != coordination.ReleaseUnknown || out.String() != "unknown" {
			t.Errorf("failed Release = %v (%d), want ReleaseUnknown (\"unknown\")", out, int(out))
		}
		if strings.Contains(err.Error(), l.Token()) {
			t.Errorf("error %q names the token", err)
		}
		_ = b.Admin(t).Del(ctx, b.Key("held"))
	})
}

// An acquisition whose send provably never happened (a failed dial) is not
// ambiguous and leaves no background cleanup; one that may have run (a
// lost reply) schedules one.
func TestUnsentAcquireSchedulesNoCleanup(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name    string
			err     error
			cleanup int
		}{
			{"refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, 0},
			{"no such host", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h.invalid", IsNotFound: true}}, 0},
			{"pool timeout", redis.ErrPoolTimeout, 0},
			{"lost reply", testharness.ErrLostReply, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				// Every command fails, the cleanup's releases too: a
				// scheduled cleanup keeps running until Clear.
				faults.Add(testharness.Fault{Command: "set", Err: c.err, Times: -1})
				faults.Add(testharness.Fault{Err: c.err, Times: -1})
				_, err := tryAcquire(ctx, coord, "{u}", time.Minute)
				n := e.Cleanups()
				faults.Clear()
				if !errors.Is(err, c.err) {
					t.Fatalf("TryAcquire: %v, want the injected %v", err, c.err)
				}
				if got := coordination.IsAmbiguous(err); got != (c.cleanup > 0) {
					t.Errorf("IsAmbiguous(%v) = %v", err, got)
				}
				if n != c.cleanup {
					t.Errorf("%d background cleanups after %v, want %d", n, err, c.cleanup)
				}
				for deadline := time.Now().Add(30 * time.Second); e.Cleanups() > 0 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	})
}

// A lock key holding a string the library did not write (someone else's
// value, with or without a TTL), or an owner token without a TTL
// (PERSISTed), is bad state: TryAcquire and Acquire return ErrBadState
// (before, TryAcquire answered ErrNotAcquired and Acquire waited until
// ctx ended) and write nothing. TryAcquire's one round trip (SET NX GET)
// sees the value, not its TTL: a PERSISTed token reads as held there.
func TestLockForeignValueIsBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Admin(t)
		token, err := engine.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, value string
			ttl         time.Duration
			try         bool // TryAcquire detects it too
		}{
			{"foreign value without a TTL", "someone-else", 0, true},
			{"foreign value with a TTL", "someone-else", time.Hour, true},
			{"token-long value outside base64url", token[:21] + ".", time.Hour, true},
			{"upper-case UUID text", "0E0C1A5E-7D5C-4A2A-9C1E-2B6F3A4D5E6F", time.Hour, true},
			{"UUID text of an earlier version without a TTL", "0e0c1a5e-7d5c-4a2a-9c1e-2b6f3a4d5e6f", 0, false},
			{"token without a TTL", token, 0, false},
			{"marked token without a TTL", token + "+", 0, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				key := "foreign:" + strings.ReplaceAll(c.name, " ", "-")
				if err := raw.Set(ctx, b.Key(key), c.value, c.ttl).Err(); err != nil {
					t.Fatal(err)
				}
				unchanged := func(what string) {
					t.Helper()
					if v, err := raw.Get(ctx, b.Key(key)).Result(); err != nil || v != c.value {
						t.Errorf("after %s the key holds %q (%v), want %q unchanged", what, v, err, c.value)
					}
				}
				_, err := tryAcquire(ctx, coord, key, time.Minute)
				if c.try {
					if !errors.Is(err, coordination.ErrBadState) || errors.Is(err, coordination.ErrNotAcquired) ||
						!strings.HasPrefix(err.Error(), `coordination: lock acquire "`+key+`": `) {
						t.Errorf("TryAcquire: %v, want ErrBadState naming the operation and key", err)
					}
				} else if !errors.Is(err, coordination.ErrNotAcquired) {
					t.Errorf("TryAcquire: %v, want ErrNotAcquired (one round trip cannot see the TTL)", err)
				}
				unchanged("TryAcquire")
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				_, err = acquire(actx, coord, key, time.Minute)
				if !errors.Is(err, coordination.ErrBadState) || errors.Is(err, coordination.ErrNotAcquired) || actx.Err() != nil ||
					engine.Classify(err) != engine.Terminal {
					t.Errorf("Acquire: %v (ctx %v), want ErrBadState at once, terminal", err, actx.Err())
				}
				unchanged("Acquire")
			})
		}
	})
}
