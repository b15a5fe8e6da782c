package testharness

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
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

// Late is one client of a late-request test: a coordinator with the
// backend's key prefix on a client whose connection to one key's server
// passes a fault proxy ([Backend.Proxied] with [LateClient]'s options),
// shut down when the test ends, before its client closes. [Late.Hold]
// holds one acquisition's request in the proxy, and [Late.LetThrough]
// lets it reach the server, typically once [Late.WaitCleanups] saw the
// acquisition's background cleanup end: the request then arrives after
// the cleanup, as a retransmission or a stalled link would deliver it.
// What differs between primitives (the acquisition, the request to hold,
// what the server must hold afterwards) is the test's. Not safe for
// concurrent use.
type Late struct {
	// Coord is the coordinator on the proxied client, for the primitive
	// under test; Engine is its engine (the one Hold's cleanup runs on).
	Coord  *coordination.Coordinator
	Engine *engine.Engine
	proxy  *faultproxy.Proxy
	held   *faultproxy.Applied
}

// Late returns a late-request client whose proxy stands before the server
// of key (the key's full name, as [Backend.Key] gives it). It fails t when
// the coordinator cannot be made.
func (b *Backend) Late(t testing.TB, key string) *Late {
	t.Helper()
	p, client := b.Proxied(t, key, LateClient)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	return &Late{Coord: coord, Engine: e, proxy: p}
}

// Hold holds the first request that m matches in the proxy (the scripts
// the acquisition runs must be loaded on the server already, so that the
// held request is the acquisition's own) and runs acquire, the
// acquisition that sends it. acquire's error must be ambiguous (its reply
// never came: the client's read timeout, or acquire's context, ended
// first), with exactly one request held; Hold fails t otherwise. The
// cleanup the engine starts for the acquisition runs in the background.
// A Late holds one request at a time: a second Hold before LetThrough
// fails t.
func (l *Late) Hold(t testing.TB, m faultproxy.Match, acquire func() error) {
	t.Helper()
	if l.held != nil {
		t.Fatal("testharness: Late.Hold while a request is held")
	}
	l.held = l.proxy.Apply(faultproxy.HoldCommand(m, 1))
	if err := acquire(); !coordination.IsAmbiguous(err) {
		t.Fatalf("acquisition = %v, want an ambiguous error", err)
	}
	if n := l.held.Fired(); n != 1 {
		t.Fatalf("held %d requests, want 1", n)
	}
}

// WaitCleanups waits, for at most 10 s, until l's engine runs no
// background cleanup ([WaitCleanups]).
func (l *Late) WaitCleanups(t testing.TB) {
	t.Helper()
	WaitCleanups(t, l.Engine)
}

// LetThrough lets the request Hold held reach the server and waits, for
// at most 5 s, until the server answered it ([LetThrough]).
func (l *Late) LetThrough(t testing.TB) {
	t.Helper()
	if l.held == nil {
		t.Fatal("testharness: Late.LetThrough without a held request")
	}
	LetThrough(t, l.held)
	l.held = nil
}
