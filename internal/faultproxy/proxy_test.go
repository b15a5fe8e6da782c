package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/faultproxy"
	"github.com/coordkit/coordination/internal/testharness"
)

// env is a proxy in front of the first available real server, and a direct
// client of that server to look behind the proxy's back.
type env struct {
	b      *testharness.Backend
	p      *faultproxy.Proxy
	direct redis.UniversalClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := testharness.Get(t, testharness.FirstFlavor(t))
	return &env{b: b, p: faultproxy.Start(t, b.Server.Addr), direct: b.Client(t)}
}

// client returns a go-redis client that goes through the proxy (the
// harness' options: 2 s read timeout, go-redis' default 3 retries, RESP3),
// closed when the test ends.
func (e *env) client(t *testing.T, modify ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := e.b.Server.Options()
	o.Addr = e.p.Addr()
	for _, m := range modify {
		m(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func noRetries(o *redis.Options) { o.MaxRetries = -1 }

// get returns the key's value read directly from the server, "" if absent.
func (e *env) get(t *testing.T, key string) string {
	t.Helper()
	v, err := e.direct.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("direct GET %s: %v", key, err)
	}
	return v
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("direct GET = %q", v)
	}
	s := e.p.Stats()
	if s.Commands["SET"] != 1 || s.Commands["GET"] != 1 || s.Accepted != 1 || s.ParseErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDropReplyIsRetriedOnANewConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	drop := e.p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1))
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatalf("SET through a dropped reply with retries: %v", err)
	}
	select {
	case <-drop.Done():
	default:
		t.Fatal("rule not used up after firing once")
	}
	s := e.p.Stats()
	if s.Commands["SET"] != 2 || s.DroppedReplies != 1 || drop.Fired() != 1 || s.Accepted != 2 {
		t.Fatalf("SET seen %d times, %d replies dropped, fired %d, %d connections; want 2, 1, 1, 2",
			s.Commands["SET"], s.DroppedReplies, drop.Fired(), s.Accepted)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v", v)
	}
}

func TestDropReplyWithoutRetriesLeavesTheWriteBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries)
	k := e.b.Key("k")
	e.p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1))
	err := c.Set(ctx, k, "v", 0).Err()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("SET = %v, want EOF (the lost reply)", err)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v: the command ran", v)
	}
	if n := e.p.Stats().Commands["SET"]; n != 1 {
		t.Fatalf("SET seen %d times, want 1", n)
	}
	// The next command works, on a new connection.
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET after = %q, %v", v, err)
	}
}

func TestRawCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, mode := range []faultproxy.CutMode{faultproxy.RST, faultproxy.FIN} {
		nc, err := net.Dial("tcp", e.p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := io.ReadAtLeast(nc, buf, 7)
		if err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("PING = %q, %v", buf[:n], err)
		}
		if got := e.p.CutAll(mode); got != 1 {
			t.Fatalf("CutAll = %d, want 1", got)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = nc.Read(buf)
		switch mode {
		case faultproxy.RST:
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after CutAll(RST) = %v, want connection reset", err)
			}
		case faultproxy.FIN:
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read after CutAll(FIN) = %v, want EOF", err)
			}
		}
	}
	if s := e.p.Stats(); s.Cut != 2 || s.Commands["PING"] != 2 {
		t.Fatalf("stats %+v, want 2 cut and 2 PING", s)
	}
	_ = strings.ToUpper
}
