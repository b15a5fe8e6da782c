package testharness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/sentinel"
)

// CorruptOp is one operation a corruption test calls on corrupted state.
type CorruptOp struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Corruption is one way of damaging a key the library wrote: another
// Redis type, or garbage of the same type.
type Corruption struct {
	Name  string
	Apply func(ctx context.Context, c redis.UniversalClient, key, typ string, mini bool) error
}

// Corruptions damage a key in each way a foreign writer or a bug could:
// another Redis type; text, negative, empty and out-of-range values in
// every field of a hash (and in a string); foreign members with
// out-of-range scores in a sorted set.
var Corruptions = []Corruption{
	{"wrong type", func(ctx context.Context, c redis.UniversalClient, key, typ string, _ bool) error {
		c.Del(ctx, key)
		if typ == "string" {
			return c.RPush(ctx, key, "garbage").Err()
		}
		return c.Set(ctx, key, "garbage", 0).Err()
	}},
	{"text", fill("garbage\xff\x00")},
	{"negative", fill("-1")},
	{"empty", fill("")},
	{"out of range", fill("99999999999999999999999")},
	{"minimum int64", fill("-9223372036854775808")},
	{"float", fill("1.5e300")},
}

// fill sets every field of a hash, a string, or every member's score of a
// sorted set (plus a foreign member) to v; lists and sets get a foreign
// element.
func fill(v string) func(ctx context.Context, c redis.UniversalClient, key, typ string, mini bool) error {
	return func(ctx context.Context, c redis.UniversalClient, key, typ string, mini bool) error {
		switch typ {
		case "string":
			return c.Set(ctx, key, v, redis.KeepTTL).Err()
		case "hash":
			fields, err := c.HKeys(ctx, key).Result()
			if err != nil {
				return err
			}
			for _, f := range append(fields, "garbage") {
				if err := c.HSet(ctx, key, f, v).Err(); err != nil {
					return err
				}
			}
			return nil
		case "zset":
			members, err := c.ZRange(ctx, key, 0, -1).Result()
			if err != nil {
				return err
			}
			score, err := strconv.ParseFloat(v, 64)
			if err != nil {
				score = 0
			}
			if mini {
				// miniredis formats scores beyond 2^53 with an exponent
				// ("9.2e+18") that its Lua's tonumber cannot read back; real
				// servers' formatting reads back (tested there).
				score = max(min(score, 1<<53), -(1 << 53))
			}
			for _, m := range append(members, v, "garbage") {
				if err := c.ZAdd(ctx, key, redis.Z{Score: score, Member: m}).Err(); err != nil {
					return err
				}
			}
			return nil
		case "list":
			return c.RPush(ctx, key, v).Err()
		case "set":
			return c.SAdd(ctx, key, v).Err()
		}
		return fmt.Errorf("corrupt: key of type %s", typ)
	}
}

// CorruptionTest creates a primitive's state with setup (which returns the
// operations to call afterwards, over handles it created), damages one of
// the keys it wrote in each way of [Corruptions], and calls every
// operation: each returns nil, a registered answer (such as
// ErrNotAcquired), or an error matching ErrBadState (a wrong Redis type
// included) or ErrConfigMismatch or, where allowed is given and says so, another error. None
// panics. Every corruption of every key runs on fresh state under its own
// prefix.
func CorruptionTest(t *testing.T, b *Backend, setup func(t *testing.T, coord *coordination.Coordinator) []CorruptOp, allowed func(err error) bool) {
	t.Helper()
	ctx := context.Background()
	raw := b.Admin(t) // SCAN and writing garbage need more than the least-privilege user
	// One run without damage learns the keys the primitive writes.
	base := coordination.WithKeyPrefix(b.Prefix() + "c0:")
	coord, err := coordination.New(b.Client(t), base)
	if err != nil {
		t.Fatal(err)
	}
	setup(t, coord)
	keys := scanPrefix(ctx, t, raw, b.Prefix()+"c0:")
	if len(keys) == 0 {
		t.Fatal("setup wrote no key")
	}
	n := 0
	var nils []string
	defer func() {
		t.Logf("corruption: %d keys x %d corruptions; operations that returned nil on corrupted state: %v", len(keys), len(Corruptions), nils)
	}()
	for _, key := range keys {
		suffix := strings.TrimPrefix(key, b.Prefix()+"c0:")
		for _, c := range Corruptions {
			n++
			prefix := fmt.Sprintf("%sc%d:", b.Prefix(), n)
			coord, err := coordination.New(b.Client(t), coordination.WithKeyPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			ops := setup(t, coord)
			full := prefix + suffix
			typ, err := raw.Type(ctx, full).Result()
			if err != nil || typ == "none" {
				t.Fatalf("key %q after setup: type %q, %v", suffix, typ, err)
			}
			if err := c.Apply(ctx, raw, full, typ, b.IsMini()); err != nil {
				t.Fatalf("corrupt %q (%s) with %s: %v", suffix, typ, c.Name, err)
			}
			raw.PExpire(ctx, full, time.Minute)
			for _, op := range ops {
				err := call(ctx, op)
				switch {
				case err == nil:
					nils = append(nils, fmt.Sprintf("%s/%s/%s", op.Name, suffix, c.Name))
				case sentinel.IsAnswer(err), errors.Is(err, coordination.ErrBadState),
					errors.Is(err, coordination.ErrConfigMismatch):
				case allowed != nil && allowed(err):
				default:
					t.Errorf("%s on %q (%s) corrupted with %s: %v (%T), want nil, an answer or ErrBadState",
						op.Name, suffix, typ, c.Name, err, err)
				}
			}
		}
	}
}

// call runs one operation with a bound, turning a panic into a test
// failure of the operation.
func call(ctx context.Context, op CorruptOp) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return op.Fn(ctx)
}

func scanPrefix(ctx context.Context, t *testing.T, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	switch cc := c.(type) {
	case *redis.ClusterClient:
		err = cc.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, cc)
	default:
		err = fmt.Errorf("client %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// PermitWithoutExpiry edits the semaphore key full (with its prefix) as
// an operator could, by hand: member (P:<n>:<token>) is scored +inf, a
// permit without expiry, and the key loses its TTL. The library never
// writes such a permit (every permit has a TTL of at least 1 ms); tests
// of what reads or repairs one (State, coordctl inspect and repair
// semaphore) make it with this.
func PermitWithoutExpiry(t testing.TB, c redis.UniversalClient, full, member string) {
	t.Helper()
	ctx := context.Background()
	n, err := c.ZAddXX(ctx, full, redis.Z{Score: math.Inf(1), Member: member}).Result()
	if err != nil || n != 0 {
		t.Fatalf("ZADD XX +inf %s: %d, %v", member, n, err)
	}
	if ok, err := c.ZScore(ctx, full, member).Result(); err != nil || !math.IsInf(ok, 1) {
		t.Fatalf("the permit %s is not scored +inf: %v, %v", member, ok, err)
	}
	if err := c.Persist(ctx, full).Err(); err != nil {
		t.Fatalf("PERSIST: %v", err)
	}
}
