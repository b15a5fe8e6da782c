package coordination_test

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// New warns once when the client's options leave ContextTimeoutEnabled
// off (a context's deadline then does not bound a command: with the server
// paused 3 s, a lock call with a 1 s context returned after 3.07 s), naming
// the option and nothing of the connection; a client with it on, or one
// whose options cannot be read, gets no warning. New sends nothing either
// way (the clients point at a refused address).
func TestNewWarnsWhenDeadlinesAreIgnored(t *testing.T) {
	addr := testharness.RefusedAddr(t)
	const user, password = "warn-user-4711", "warn-Secret-0815"
	for _, tc := range []struct {
		name string
		open func(timeouts bool) redis.UniversalClient
	}{
		{"client", func(on bool) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, ContextTimeoutEnabled: on})
		}},
		{"cluster", func(on bool) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Username: user, Password: password, ContextTimeoutEnabled: on})
		}},
		{"ring", func(on bool) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, Username: user, Password: password, ContextTimeoutEnabled: on})
		}},
		{"failover", func(on bool) redis.UniversalClient {
			return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{addr},
				Username: user, Password: password, ContextTimeoutEnabled: on})
		}},
		{"universal", func(on bool) redis.UniversalClient {
			return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, Username: user, Password: password, ContextTimeoutEnabled: on})
		}},
		{"other implementation", func(bool) redis.UniversalClient {
			return wrappedClient{redis.NewClient(&redis.Options{Addr: addr})}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, on := range []bool{false, true} {
				var buf bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&buf, nil))
				c := tc.open(on)
				counter := testharness.CountCommands(c)
				coord, err := coordination.New(c, coordination.WithLogger(logger), coordination.WithKeyPrefix("warn:"))
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				if !on && tc.name != "other implementation" {
					want = 1
				}
				out := buf.String()
				if got := strings.Count(out, "ContextTimeoutEnabled is off"); got != want {
					t.Errorf("ContextTimeoutEnabled=%v: %d warnings, want %d; log:\n%s", on, got, want, out)
				}
				if want == 1 && (!strings.Contains(out, "level=WARN") || !strings.Contains(out, "option=ContextTimeoutEnabled")) {
					t.Errorf("the warning is not a WARN record naming the option: %s", out)
				}
				for _, secret := range []string{addr, "127.0.0.1", user, password, "mymaster", "warn:"} {
					if strings.Contains(out, secret) {
						t.Errorf("the warning holds %q: %s", secret, out)
					}
				}
				if n := counter.Count(); n != 0 {
					t.Errorf("New sent %d commands, want 0", n)
				}
				if err := coord.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Without WithLogger, the warning goes to slog.Default() (the library's
// own logger discards everything else). The test is not parallel: it
// replaces the process's default logger while it runs.
func TestNewWarnsThroughTheDefaultLogger(t *testing.T) {
	var buf bytes.Buffer
	// slog.SetDefault also sends the log package's output to the new
	// handler, and setting the old default back does not undo that: the
	// log package's writer and flags are put back by hand, or every later
	// log line of the test binary (a log.Fatal's included) would go into
	// buf, unseen.
	old, w, flags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer func() {
		slog.SetDefault(old)
		log.SetOutput(w)
		log.SetFlags(flags)
	}()

	c := redis.NewClient(&redis.Options{Addr: testharness.RefusedAddr(t)})
	defer c.Close()
	if _, err := coordination.New(c); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(buf.String(), "ContextTimeoutEnabled is off"); got != 1 {
		t.Errorf("%d warnings on slog.Default, want 1; log:\n%s", got, buf.String())
	}

	buf.Reset()
	on := redis.NewClient(&redis.Options{Addr: testharness.RefusedAddr(t), ContextTimeoutEnabled: true})
	defer on.Close()
	if _, err := coordination.New(on); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("a client with ContextTimeoutEnabled: logged %q, want nothing", buf.String())
	}
}

// wrappedClient is a UniversalClient that is none of go-redis' own types:
// its options cannot be read, so New says nothing about them.
type wrappedClient struct{ *redis.Client }
