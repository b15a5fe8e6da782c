package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// An ACL that denies what an operation needs surfaces as the server's own
// permission error, terminal, from Begin, Complete and Abandon: never as
// ErrBadState (which a pcall around the script's read would
// have made of it), and nothing is written.
//
// A user allowed only EVAL and EVALSHA gets the error the server raises
// inside the script for the denied HMGET ("ERR ACL failure in script: User
// ... has no permissions to run the 'hmget' command" on Redis 8 and Valkey,
// "ERR The user executing the script can't run this command or subcommand"
// on Redis 7.0), which the library reports as NOPERM, like the server does
// for a denied command outside a script. A user denied EVALSHA itself, or
// the key, gets the server's NOPERM.
func TestACLDeniedCommandIsTheServersError(t *testing.T) {
	users := []struct {
		name  string
		rules []any
		want  []string // the error contains one of these
	}{
		{"script commands denied", []any{"~*", "&*", "-@all", "+eval", "+evalsha", "+ping", "+hello"},
			[]string{"NOPERM"}},
		{"evalsha denied", []any{"~*", "&*", "-@all", "+ping", "+hello"}, []string{"NOPERM"}},
		{"key denied", []any{"~other:*", "&*", "+@all"}, []string{"NOPERM"}},
	}
	for _, flavor := range testharness.Flavors {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			srv := testharness.StartStandalone(t, flavor)
			admin := redis.NewClient(srv.Options())
			defer admin.Close()
			ctx := context.Background()
			for _, u := range users {
				if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "denied", "reset", "on", ">pw"}, u.rules...)...).Err(); err != nil {
					t.Fatal(err)
				}
				o := srv.Options()
				o.Username, o.Password = "denied", "pw"
				c := redis.NewClient(o)
				coord, err := coordination.New(c)
				if err != nil {
					t.Fatal(err)
				}
				store, err := idempotency.New(coord)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range []struct {
					name string
					call func() error
				}{
					{"Begin", func() error {
						return second(store.Begin(ctx, "k", time.Minute, idempotency.WithWait(time.Second)))
					}},
					{"Complete", func() error { return second(store.Complete(ctx, "k", "owner", []byte("r"))) }},
					{"Abandon", func() error { return second(store.Abandon(ctx, "k", "owner")) }},
				} {
					err := op.call()
					if err == nil || !containsAny(err.Error(), u.want) {
						t.Errorf("%s, %s: %v, want the server's permission error (%q)", u.name, op.name, err, u.want)
					}
					if c := engine.Classify(err); c != engine.Terminal {
						t.Errorf("%s, %s: class %v, want terminal", u.name, op.name, c)
					}
					if errors.Is(err, coordination.ErrBadState) {
						t.Errorf("%s, %s: %v reads as bad state or wrong type", u.name, op.name, err)
					}
				}
				_ = c.Close()
				if n, err := admin.Exists(ctx, "k").Result(); err != nil || n != 0 {
					t.Fatalf("%s: the denied calls left a key (%d, %v)", u.name, n, err)
				}
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
