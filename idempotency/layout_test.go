package idempotency_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The claim layout is the documented one (a later coordctl inspect decodes
// it): a pending claim "P<result ttl>:<fence>:<owner>:<fp>", a completed
// one "C<completion id>:<fp><result>", an abandoned one "A<fence>:<abandon
// id>" for 5 s, fp "-:" for none or "<len>:<bytes>".
func TestClaimLayout(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		get := func(key string) string {
			t.Helper()
			v, err := f.raw.Get(ctx, b.Key(key)).Result()
			if err != nil {
				t.Fatalf("GET %s: %v", key, err)
			}
			return v
		}
		c := f.begin(t, "plain", time.Minute, idempotency.WithResultTTL(2*time.Hour))
		if got, want := get("plain"), "P7200000:"+strconv.FormatInt(c.Fence, 10)+":"+c.Owner+":-:"; got != want {
			t.Fatalf("pending claim = %q, want %q", got, want)
		}
		if !f.complete(t, "plain", c.Owner, []byte("ok:result")) {
			t.Fatal("Complete = false")
		}
		v := get("plain")
		id, rest, ok := strings.Cut(strings.TrimPrefix(v, "C"), ":")
		if !strings.HasPrefix(v, "C") || !ok || len(id) != 22 || rest != "-:ok:result" {
			t.Fatalf("completed claim = %q, want C<22-character completion id>:-:ok:result", v)
		}
		if d := f.pttl(t, "plain"); d <= time.Hour || d > 2*time.Hour {
			t.Fatalf("completed claim's TTL = %v, want the 2h result TTL", d)
		}

		c = f.begin(t, "fp", time.Minute, idempotency.WithFingerprint("a:b"))
		if got, want := get("fp"), "P60000:"+strconv.FormatInt(c.Fence, 10)+":"+c.Owner+":3:a:b"; got != want {
			t.Fatalf("pending claim with a fingerprint = %q, want %q", got, want)
		}
		f.complete(t, "fp", c.Owner, nil)
		if v := get("fp"); !strings.HasPrefix(v, "C") || !strings.HasSuffix(v, ":3:a:b") {
			t.Fatalf("completed claim with a fingerprint and an empty result = %q", v)
		}
		f.wantResult(t, "fp", "", idempotency.WithFingerprint("a:b"))
		wantState(t, f.begin(t, "fp", time.Minute, idempotency.WithFingerprint("a:")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "fp", time.Minute, idempotency.WithFingerprint("")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "fp", time.Minute), idempotency.FingerprintMismatch)

		c = f.begin(t, "ab", time.Minute)
		if !f.abandon(t, "ab", c.Owner) {
			t.Fatal("Abandon = false")
		}
		v = get("ab")
		fence, id, ok := strings.Cut(strings.TrimPrefix(v, "A"), ":")
		if !strings.HasPrefix(v, "A") || !ok || fence != strconv.FormatInt(c.Fence, 10) || len(id) != 22 {
			t.Fatalf("abandoned claim = %q, want A%d:<22-character abandon id>", v, c.Fence)
		}
		if d := f.pttl(t, "ab"); d <= 0 || d > 5*time.Second {
			t.Fatalf("abandoned claim's TTL = %v, want at most 5 s", d)
		}
		next := f.begin(t, "ab", time.Minute)
		wantState(t, next, idempotency.Started)
		if next.Fence <= c.Fence {
			t.Fatalf("fence after Abandon = %d, want > %d", next.Fence, c.Fence)
		}
	})
}

// A completed claim with a 100-byte result and a 40-byte key takes at most
// 320 bytes (MEMORY USAGE), within 1.5 times its key and payload (key,
// result, completion id).
func TestCompletedClaimMemory(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := t.Context()
		// A short prefix of our own, so that the key is 40 bytes.
		prefix := "mem:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
		// The admin client: the prefix is outside the least-privilege
		// user's key pattern.
		coord, err := coordination.New(b.Admin(t), coordination.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.Repeat("k", 40-len(prefix))
		c, err := store.Begin(ctx, name, time.Minute)
		if err != nil || c.State != idempotency.Started {
			t.Fatalf("Begin = %v, %v", c.State, err)
		}
		if ok, err := store.Complete(ctx, name, c.Owner, []byte(strings.Repeat("r", 100))); err != nil || !ok {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
		raw := b.Admin(t)
		defer raw.Del(ctx, prefix+name)
		n, err := raw.MemoryUsage(ctx, prefix+name, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: MEMORY USAGE of a completed claim with a 100-byte result, 40-byte key: %d bytes", b.Name, n)
		if n > 320 {
			t.Errorf("MEMORY USAGE = %d bytes, want at most 320", n)
		}
	}, testharness.RealOnly())
}
