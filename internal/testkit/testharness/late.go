package testharness

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// LateClient sets the options of a late-request test's client (for
// [Backend.Proxied]): a 200 ms read timeout, and no go-redis re-send, so
// that the request the fault proxy holds is the only one sent.
func LateClient(o *redis.Options) { o.ReadTimeout, o.MaxRetries = 200*time.Millisecond, -1 }

// WaitCleanups waits, for at most 10 s, until e runs no background
// cleanup, and fails t when one still runs then.
func WaitCleanups(t testing.TB, e *engine.Engine) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.Cleanups() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("cleanups still running: %d", e.Cleanups())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LetThrough lets the one request held lets through and waits, for at
// most 5 s, until the server answered it; it fails t when held held
// another number of requests or the answer never came.
func LetThrough(t testing.TB, held *faultproxy.Applied) {
	t.Helper()
	if held.Fired() != 1 {
		t.Fatalf("held %d requests, want 1", held.Fired())
	}
	held.Let()
	for deadline := time.Now().Add(5 * time.Second); held.Answered() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the held request was never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
