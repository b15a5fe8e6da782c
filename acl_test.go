package coordination_test

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
	"github.com/coordkit/coordination/semaphore"
)

// clientCommands are the commands the library (through go-redis) sends
// itself, besides what its scripts call.
var clientCommands = []string{
	"eval", "evalsha", // every operation: EVALSHA, EVAL after NOSCRIPT
	"subscribe", "unsubscribe", "ping", // the notification hub's Pub/Sub connection (PING: its health check)
	"ssubscribe", "sunsubscribe", "spublish", // its sharded connections; SPUBLISH: its one probe of the server
	"hello", "client|setinfo", // go-redis' connection handshake (RESP3, library name and version)
	"wait", // WithReplicaAcks
}

// scriptCall matches the command name of every redis.call and redis.pcall.
var scriptCall = regexp.MustCompile(`redis\.p?call\(\s*([^,)]*)`)

// scriptCommands returns the commands the scripts call, lower case, and
// fails t for a call whose command is not a string literal (the ACL could
// not be derived from it).
func scriptCommands(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range lua.Names() {
		src, err := fs.ReadFile(lua.FS(), name+".lua")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, m := range scriptCall.FindAllStringSubmatch(line, -1) {
				lit := strings.TrimSpace(m[1])
				if len(lit) < 3 || lit[0] != '\'' && lit[0] != '"' || lit[len(lit)-1] != lit[0] {
					t.Errorf("%s.lua: %q: the command is not a string literal", name, strings.TrimSpace(line))
					continue
				}
				out = append(out, strings.ToLower(lit[1:len(lit)-1]))
			}
		}
	}
	return out
}

// docs/acl.md's ACL line grants exactly the commands the scripts call plus
// the ones the client sends, sorted, on the prefix's keys and channels.
func TestREADMEACLLine(t *testing.T) {
	want := append(scriptCommands(t), clientCommands...)
	slices.Sort(want)
	want = slices.Compact(want)
	line, err := testharness.ACLLine()
	if err != nil {
		t.Fatal(err)
	}
	wantLine := "ACL SETUSER coord on ><password> resetkeys ~<prefix>* resetchannels &coordination:<prefix>* -@all +" +
		strings.Join(want, " +")
	if line != wantLine {
		t.Errorf("docs/acl.md's ACL line differs from the commands the library sends; it should read:\n\n%s\n", wantLine)
	}
}

// The line's subcommand rules and category are known to the server (on
// the least-privilege backend, where the user was created from it), and
// a user with it but a key outside the prefix is refused.
func TestACLUserIsLeastPrivileged(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		if !b.LeastPrivilege() {
			t.Fatalf("the %s backend does not connect as the least-privilege user", b.Name)
		}
		ctx := context.Background()
		c := b.Client(t)
		if err := c.Set(ctx, "outside-the-prefix", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("SET outside the prefix: %v, want NOPERM", err)
		}
		if err := c.ConfigGet(ctx, "maxmemory").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("CONFIG GET: %v, want NOPERM", err)
		}
		coord, err := coordination.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lockTryAcquire(ctx, coord, "outside-the-prefix", time.Minute); err == nil ||
			engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("a lock outside the prefix: %v, want a terminal NOPERM", err)
		}
	}, testharness.Only(testharness.ACLFlavor))
}

// On a Cluster, docs/acl.md's line plus +cluster|slots is
// enough: the user is created on every node of the shared cluster.
func TestACLOnCluster(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rules, err := testharness.ACLRules()
		if err != nil {
			t.Fatal(err)
		}
		args := []any{"ACL", "SETUSER", "coord-cluster", "reset"}
		for _, r := range append(rules, "+cluster|slots") {
			args = append(args, r)
		}
		for _, n := range b.Cluster.Nodes {
			admin := redis.NewClient(n.Options())
			err := admin.Do(ctx, args...).Err()
			_ = admin.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		o := b.Cluster.Options()
		o.Username, o.Password = "coord-cluster", testharness.ACLPassword
		cc := redis.NewClusterClient(o)
		t.Cleanup(func() { _ = cc.Close() })
		coord, err := coordination.New(cc, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"a", "b", "c", "d"} {
			l, err := lockTryAcquire(ctx, coord, key, time.Minute)
			if err != nil {
				t.Fatalf("TryAcquire(%s) as the least-privilege user: %v", key, err)
			}
			waited := make(chan error, 1)
			go func() {
				w, err := lockAcquire(ctx, coord, key, time.Minute) // blocks: Pub/Sub
				if err == nil {
					_, err = w.Release(ctx)
				}
				waited <- err
			}()
			time.Sleep(50 * time.Millisecond)
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-waited; err != nil {
				t.Fatalf("blocked Acquire(%s): %v", key, err)
			}
		}
		sem, err := semaphore.New(coord, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sem.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sem.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second permit of one: %v", err)
		}
		if _, err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}, testharness.Only("cluster"))
}
