package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// connArgs returns the connection flags of a backend for the commands that
// need a server: --redis to miniredis' address on the embedded backend.
func connArgs(b *testharness.Backend) []string {
	if b.IsMini() {
		return []string{"--redis", "redis://" + b.Mini.Addr() + "/0", "--prefix", b.Prefix()}
	}
	return append(serverArgs(b), "--prefix", b.Prefix())
}

// cmdline is coordctl args: verb words, the connection flags, then rest.
func cmdline(b *testharness.Backend, verb string, rest ...string) []string {
	return append(append(strings.Fields(verb), connArgs(b)...), rest...)
}

func expect(t *testing.T, wantCode int, wantOut string, args ...string) string {
	t.Helper()
	code, out, errOut := runCmd(t, args...)
	if code != wantCode || !strings.Contains(out+errOut, wantOut) {
		t.Fatalf("coordctl %s = %d\nstdout: %s\nstderr: %s\nwant %d and %q", strings.Join(args, " "), code, out, errOut, wantCode, wantOut)
	}
	return out
}

func TestLatchCommands(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		expect(t, exitRefused, `no latch at "l"`, cmdline(b, "latch countdown", "--key", "l")...)
		expect(t, exitOK, `created latch "l": count 2, generation`, cmdline(b, "latch create", "--key", "l", "--count", "2")...)
		expect(t, exitRefused, "already exists", cmdline(b, "latch create", "--key", "l", "--count", "2")...)
		expect(t, exitOK, "1 left", cmdline(b, "latch countdown", "--key", "l")...)
		expect(t, exitOK, "0 left", cmdline(b, "latch countdown", "--key", "l")...)
		expect(t, exitRefused, "already reached zero", cmdline(b, "latch countdown", "--key", "l")...)
		expect(t, exitOK, "reached zero", cmdline(b, "latch wait", "--key", "l")...)
		expect(t, exitUsage, "--count is required", cmdline(b, "latch create", "--key", "m")...)
		expect(t, exitRefused, "no latch", cmdline(b, "latch wait", "--key", "none")...)
		// A key of another kind is refused.
		if err := b.Client(t).Set(context.Background(), b.Key("str"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "latch countdown", cmdline(b, "latch countdown", "--key", "str")...)
	})
}

// latch wait blocks until the count-downs of another process end the latch,
// and gives up with 1 at --timeout.
func TestLatchWaitBlocks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		expect(t, exitOK, "created", cmdline(b, "latch create", "--key", "w", "--count", "1")...)
		start := time.Now()
		expect(t, exitRefused, "--timeout 200ms passed", cmdline(b, "latch wait", "--key", "w", "--timeout", "200ms")...)
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Fatalf("latch wait --timeout 200ms returned after %v", took)
		}
		done := make(chan int, 1)
		go func() {
			code, _, _ := runCmd(t, cmdline(b, "latch wait", "--key", "w")...)
			done <- code
		}()
		time.Sleep(100 * time.Millisecond)
		expect(t, exitOK, "0 left", cmdline(b, "latch countdown", "--key", "w")...)
		select {
		case code := <-done:
			if code != exitOK {
				t.Fatalf("latch wait = %d, want 0", code)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("latch wait did not return after the last count-down")
		}
		// A deadline that passes breaks the latch: wait and countdown say so.
		expect(t, exitOK, "created", cmdline(b, "latch create", "--key", "d", "--count", "1", "--deadline", "100ms")...)
		time.Sleep(150 * time.Millisecond)
		expect(t, exitRefused, "broken", cmdline(b, "latch wait", "--key", "d")...)
		expect(t, exitRefused, "broken", cmdline(b, "latch countdown", "--key", "d")...)
	}, testharness.RealOnly())
}

func TestRatelimitTry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, algo := range [][]string{
			{"--algorithm", "fixed-window", "--window", "1m"},
			{"--algorithm", "sliding-window", "--window", "1m"},
			{"--algorithm", "token-bucket", "--period", "1m"},
			{"--algorithm", "gcra", "--period", "1m"},
		} {
			key := "rl:" + algo[1]
			try := func() []string {
				return cmdline(b, "ratelimit try", append([]string{"--key", key, "--limit", "2"}, algo...)...)
			}
			expect(t, exitOK, "granted 1; 1 available", try()...)
			expect(t, exitOK, "granted 1; 0 available", try()...)
			expect(t, exitRefused, "limited; retry after", try()...)
		}
		// Other settings at the same key: refused as a usage error.
		expect(t, exitRefused, "other settings", cmdline(b, "ratelimit try", "--key", "rl:gcra", "--limit", "5", "--algorithm", "gcra", "--period", "1m")...)
		expect(t, exitUsage, "--algorithm is required", cmdline(b, "ratelimit try", "--key", "x", "--limit", "5")...)
		expect(t, exitUsage, `--algorithm "leaky"`, cmdline(b, "ratelimit try", "--key", "x", "--limit", "5", "--algorithm", "leaky")...)
		expect(t, exitUsage, "--window is required", cmdline(b, "ratelimit try", "--key", "x", "--limit", "5", "--algorithm", "fixed-window")...)
	})
}

func TestDenylist(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		expect(t, exitOK, "tenant:1: allowed", cmdline(b, "denylist check", "--key", "deny", "tenant:1")...)
		expect(t, exitOK, "tenant:2: denied", cmdline(b, "denylist add", "--key", "deny", "tenant:1", "tenant:2")...)
		// An empty identity is a usage error before anything is written.
		expect(t, exitUsage, "identity 2 is empty", cmdline(b, "denylist add", "--key", "deny", "tenant:7", "", "tenant:8")...)
		if n := b.Raw(t).Exists(context.Background(), b.Key("deny")).Val(); n != 1 {
			t.Fatal("the deny list disappeared")
		}
		expect(t, exitOK, "tenant:7: allowed", cmdline(b, "denylist check", "--key", "deny", "tenant:7")...)
		expect(t, exitRefused, "tenant:1: denied", cmdline(b, "denylist check", "--key", "deny", "tenant:1")...)
		expect(t, exitOK, "tenant:1: allowed", cmdline(b, "denylist remove", "--key", "deny", "tenant:1")...)
		expect(t, exitOK, "tenant:1: allowed", cmdline(b, "denylist check", "--key", "deny", "tenant:1")...)
		expect(t, exitRefused, "tenant:2: denied", cmdline(b, "denylist check", "--key", "deny", "tenant:2")...)
		// A deny list is a sorted set (it was a set before timed denials).
		if n := b.Admin(t).ZCard(context.Background(), b.Key("deny")).Val(); n != 1 {
			t.Fatalf("ZCARD = %d, want 1", n)
		}
		expect(t, exitOK, "tenant:3: denied", cmdline(b, "denylist add", "--key", "deny", "--for", "1h", "tenant:3")...)
		expect(t, exitRefused, "tenant:3: denied", cmdline(b, "denylist check", "--key", "deny", "tenant:3")...)
		if ttl := b.Admin(t).ZScore(context.Background(), b.Key("deny"), "tenant:3").Val() - float64(b.Now().UnixMilli()); ttl < float64(59*time.Minute/time.Millisecond) || ttl > float64(time.Hour/time.Millisecond) {
			t.Fatalf("--for 1h: the denial ends %v ms from now, want about 1h", ttl)
		}
		expect(t, exitUsage, "invalid argument duration", cmdline(b, "denylist add", "--key", "deny", "--for", "1us", "tenant:4")...)
		expect(t, exitUsage, "exactly 1", cmdline(b, "denylist check", "--key", "deny", "a", "b")...)
		expect(t, exitUsage, "one or more", cmdline(b, "denylist add", "--key", "deny")...)
	})
}
