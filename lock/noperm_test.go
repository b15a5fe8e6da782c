package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A user whose ACL allows EVAL and EVALSHA but not the commands the scripts
// run (GET, SET, HMGET ...) gets a NOPERM error (inside a script each server
// words it its own way; the library reports it as NOPERM, like a denied
// command outside a script), classified terminal, and never a wrong-type or
// corrupt-state error; nothing is written.
func TestEvalOnlyUserGetsNoPerm(t *testing.T) {
	for _, flavor := range testharness.Flavors {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			srv := testharness.StartStandalone(t, flavor)
			admin := redis.NewClient(srv.Options())
			defer admin.Close()
			ctx := context.Background()
			if err := admin.Do(ctx, "ACL", "SETUSER", "evalonly", "on", ">pw", "~*", "&*", "-@all",
				"+eval", "+evalsha", "+ping", "+hello", "+client").Err(); err != nil {
				t.Fatal(err)
			}
			o := srv.Options()
			o.Username, o.Password = "evalonly", "pw"
			c := redis.NewClient(o)
			defer c.Close()
			coord, err := coordination.New(c)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				var re redis.Error // the server's reply, wrapped naming the operation and key
				if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOPERM ") || !strings.Contains(err.Error(), "NOPERM ") ||
					engine.Classify(err) != engine.Terminal ||
					errors.Is(err, coordination.ErrBadState) || coordination.IsAmbiguous(err) {
					t.Errorf("%s as an EVAL-only user: %v (class %v); want NOPERM, terminal", what, err, engine.Classify(err))
				}
			}
			_, err = tryAcquire(ctx, coord, "k", time.Minute)
			check("lock.(*Mutex).TryAcquire", err)
			fm, err := fencing.New(coord, "{f}:lease", "{f}:fence")
			if err != nil {
				t.Fatal(err)
			}
			_, err = fm.TryAcquire(ctx, time.Minute)
			check("fencing.(*Mutex).TryAcquire", err)
			doc, err := fencing.NewGuarded(coord, "{f}:doc")
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = doc.Set(ctx, 1, []byte("v"), 0)
			check("fencing.(*Guarded).Set", err)
			if n, err := admin.DBSize(ctx).Result(); err != nil || n != 0 {
				t.Errorf("the server holds %d keys (%v), want none", n, err)
			}
		})
	}
}
