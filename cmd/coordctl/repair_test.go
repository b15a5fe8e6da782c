package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/semaphore"
)

func TestIdempotencyShowAndForget(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		st, err := idempotency.New(b.Coordinator(t))
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Begin(ctx, "pay:1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, fmt.Sprintf("fencing token:  %d", c.Fence), cmdline(b, "idempotency show", "--key", "pay:1")...)
		expect(t, exitRefused, "no result yet", cmdline(b, "idempotency show", "--key", "pay:1", "--result")...)
		expect(t, exitRefused, "is pending: its owner may still be working", cmdline(b, "idempotency forget", "--key", "pay:1")...)
		if ok, err := st.Complete(ctx, "pay:1", c.Owner, []byte("receipt-77")); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if out := expect(t, exitOK, "receipt-77", cmdline(b, "idempotency show", "--key", "pay:1", "--result")...); out != "receipt-77\n" {
			t.Fatalf("--result wrote %q, want the result and a newline", out)
		}
		if out := expect(t, exitOK, "receipt-77", cmdline(b, "idempotency show", "--key", "pay:1", "--result", "--raw")...); out != "receipt-77" {
			t.Fatalf("--result --raw wrote %q, want the result's bytes alone", out)
		}
		// A binary result: base64 and a note, or its bytes with --raw.
		cb, err := st.Begin(ctx, "bin", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		bin := []byte{0x00, 0xff, 0x1b, 'x'}
		if ok, err := st.Complete(ctx, "bin", cb.Owner, bin); err != nil || !ok {
			t.Fatal(ok, err)
		}
		code, out, errOut := runCmd(t, cmdline(b, "idempotency show", "--key", "bin", "--result")...)
		if code != exitOK || out != base64.StdEncoding.EncodeToString(bin)+"\n" || !strings.Contains(errOut, "is binary, shown in base64; --raw writes its bytes") {
			t.Fatalf("binary --result: %d %q %q", code, out, errOut)
		}
		if code, out, _ := runCmd(t, cmdline(b, "idempotency show", "--key", "bin", "--result", "--raw")...); code != exitOK || out != string(bin) {
			t.Fatalf("binary --result --raw: %d %q", code, out)
		}
		code, out, errOut = runCmd(t, cmdline(b, "idempotency show", "--key", "pay:1", "--raw")...)
		if code != exitUsage || !strings.Contains(errOut, "--raw goes with --result") {
			t.Fatalf("--raw without --result: %d %q %q", code, out, errOut)
		}
		expect(t, exitRefused, "is completed, not pending", cmdline(b, "repair claim", "--key", "pay:1")...)
		expect(t, exitOK, "deleted the completed claim", cmdline(b, "idempotency forget", "--key", "pay:1")...)
		expect(t, exitRefused, "no such key", cmdline(b, "idempotency show", "--key", "pay:1")...)
		// An orphaned claim: repair claim deletes it; the next Begin starts.
		if _, err := st.Begin(ctx, "pay:2", time.Hour); err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, "deleted the pending claim", cmdline(b, "repair claim", "--key", "pay:2")...)
		if c, err := st.Begin(ctx, "pay:2", time.Hour); err != nil || c.State != idempotency.Started {
			t.Fatalf("Begin after the repair = %+v, %v", c, err)
		}
		// The middleware's namespaced keys.
		if _, err := st.Begin(ctx, idempotency.StoreKey("tenant:9", "k1"), time.Hour); err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, "pending", cmdline(b, "idempotency show", "--key", "k1", "--namespace", "tenant:9")...)
		expect(t, exitOK, "deleted", cmdline(b, "idempotency forget", "--key", "k1", "--namespace", "tenant:9", "--pending")...)
		// An abandoned claim (a free key kept 5 s with its fence): shown,
		// no result, not an orphan; forget deletes it.
		ca, err := st.Begin(ctx, "pay:5", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.Abandon(ctx, "pay:5", ca.Owner); err != nil || !ok {
			t.Fatal(ok, err)
		}
		expect(t, exitOK, fmt.Sprintf("fencing token:  %d", ca.Fence), cmdline(b, "idempotency show", "--key", "pay:5")...)
		expect(t, exitRefused, "is abandoned: no result", cmdline(b, "idempotency show", "--key", "pay:5", "--result")...)
		expect(t, exitRefused, "is abandoned, not pending", cmdline(b, "repair claim", "--key", "pay:5")...)
		expect(t, exitOK, "deleted the abandoned claim", cmdline(b, "idempotency forget", "--key", "pay:5")...)
		// A claim of the hash layout of earlier releases: unusable, so
		// deleted whatever its state.
		raw := b.Client(t)
		if err := raw.HSet(ctx, b.Key("old"), "state", "completed", "owner", "x", "ttl", "100", "result", "r", "done", "y").Err(); err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "hash layout of earlier releases", cmdline(b, "idempotency show", "--key", "old")...)
		expect(t, exitOK, "deleted the completed claim", cmdline(b, "repair claim", "--key", "old")...)
		// Keys of other kinds are refused and left alone.
		if err := raw.Set(ctx, b.Key("other"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"idempotency show", "idempotency forget", "repair claim"} {
			expect(t, exitRefused, "holds an unknown, not an idempotency claim", cmdline(b, v, "--key", "other")...)
		}
		if raw.Exists(ctx, b.Key("other")).Val() != 1 {
			t.Fatal("a refused command deleted the key")
		}
	})
}

func TestRepairSemaphore(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		sem, err := semaphore.New(b.Coordinator(t), "enc", 2)
		if err != nil {
			t.Fatal(err)
		}
		live, err := sem.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		dead, err := sem.TryAcquire(ctx, time.Hour) // made without expiry by hand; its holder "crashes"
		if err != nil {
			t.Fatal(err)
		}
		testharness.PermitWithoutExpiry(t, b.Raw(t), b.Key("enc"), "P:1:"+dead.Token())
		if _, err := sem.TryAcquire(ctx, time.Hour); err == nil {
			t.Fatal("a third permit of two")
		}
		// inspect suggests the repair, with the key (and the prefix) to give.
		expect(t, exitOK, "coordctl repair semaphore --prefix "+layout.ShellQuote(b.Prefix())+" --key enc --list", cmdline(b, "inspect", "enc")...)
		out := expect(t, exitOK, "1 permit(s) without expiry", cmdline(b, "repair semaphore", "--key", "enc", "--list")...)
		if !strings.Contains(out, dead.Token()) || strings.Contains(out, live.Token()) {
			t.Fatalf("--list:\n%s", out)
		}
		expect(t, exitRefused, "expires by itself", cmdline(b, "repair semaphore", "--key", "enc", "--permit", live.Token()[:12])...)
		expect(t, exitRefused, "no permit", cmdline(b, "repair semaphore", "--key", "enc", "--permit", "zzzz")...)
		expect(t, exitOK, "removed P:1:"+dead.Token(), cmdline(b, "repair semaphore", "--key", "enc", "--permit", dead.Token()[:12])...)
		// The key had no TTL while the permit without expiry was there:
		// it now expires with the permit left, as after a release.
		if ttl := b.Client(t).PTTL(ctx, b.Key("enc")).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("after the repair the key's TTL is %v, want the live permit's (about 1h)", ttl)
		}
		p, err := sem.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatalf("the freed permit could not be taken: %v", err)
		}
		_, _ = p.Release(ctx)
		_, _ = live.Release(ctx)
		expect(t, exitUsage, "give --list or --permit", cmdline(b, "repair semaphore", "--key", "enc")...)
		// A latch is not a semaphore.
		lt, err := latch.New(b.Coordinator(t), "l")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lt.Create(ctx, 1); err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "holds a latch, not a semaphore", cmdline(b, "repair semaphore", "--key", "l", "--list")...)
		// Removing the last permit deletes the key: its records alone
		// would stay forever (no TTL).
		solo, _ := semaphore.New(b.Coordinator(t), "solo", 1)
		only, err := solo.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		testharness.PermitWithoutExpiry(t, b.Raw(t), b.Key("solo"), "P:1:"+only.Token())
		expect(t, exitOK, "its last permit: deleted the key", cmdline(b, "repair semaphore", "--key", "solo", "--permit", only.Token()[:12])...)
		if n := b.Client(t).Exists(ctx, b.Key("solo")).Val(); n != 0 {
			t.Fatal("the key of a semaphore without permits is still there")
		}
		// A key with a capacity set in it stays, without a TTL, as after a
		// release.
		kept, _ := semaphore.New(b.Coordinator(t), "kept", 1)
		if err := kept.SetCapacity(ctx, 2); err != nil {
			t.Fatal(err)
		}
		held, err := kept.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		testharness.PermitWithoutExpiry(t, b.Raw(t), b.Key("kept"), "P:1:"+held.Token())
		out = expect(t, exitOK, "removed P:1:"+held.Token(), cmdline(b, "repair semaphore", "--key", "kept", "--permit", held.Token()[:12])...)
		if strings.Contains(out, "deleted the key") {
			t.Fatalf("the repair deleted a key with a capacity set:\n%s", out)
		}
		if st, err := kept.State(ctx); err != nil || st != (semaphore.State{Capacity: 2, CapacitySet: true}) {
			t.Fatalf("after the repair: State = %+v, %v; want capacity 2 set, nothing held", st, err)
		}
		if ttl := b.Client(t).PTTL(ctx, b.Key("kept")).Val(); ttl != -1 {
			t.Fatalf("after the repair the key's TTL is %v, want none (-1)", ttl)
		}
	})
}

func TestRepairLatch(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		broken, err := latch.New(coord, "broken", latch.WithDeadline(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := broken.Create(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if b.IsMini() {
			b.Advance(100 * time.Millisecond)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		expect(t, exitOK, "state:        broken (deadline passed)\ndeadline in:  -", cmdline(b, "inspect", "broken")...) // broken, not corrupt
		expect(t, exitOK, "with generation 2, count 1", cmdline(b, "repair latch", "--key", "broken", "--reset", "1")...)
		// The new generation is open, in use: not replaced without --force.
		expect(t, exitRefused, "is open, not broken", cmdline(b, "repair latch", "--key", "broken", "--reset", "5")...)
		if n, err := b.Client(t).HGet(ctx, b.Key("broken"), "gen").Result(); err != nil || n != "2" {
			t.Fatalf("the refused reset changed the latch: generation %q, %v", n, err)
		}
		expect(t, exitOK, "0 left", cmdline(b, "latch countdown", "--key", "broken")...)
		expect(t, exitRefused, "is complete, not broken", cmdline(b, "repair latch", "--key", "broken", "--reset", "1")...)
		expect(t, exitOK, "with generation 3, count 1", cmdline(b, "repair latch", "--key", "broken", "--reset", "1", "--force")...)
		// --delete of a latch in use (generation 3 is open) asks for --force
		// too (issue 22: it deleted a live latch without it; this test once
		// expected "--force goes with --reset" here).
		expect(t, exitRefused, "is open, not broken: --delete would drop its waiters", cmdline(b, "repair latch", "--key", "broken", "--delete")...)
		if n, err := b.Client(t).Exists(ctx, b.Key("broken")).Result(); err != nil || n != 1 {
			t.Fatalf("the refused --delete deleted the latch: %d, %v", n, err)
		}
		expect(t, exitOK, "deleted the latch", cmdline(b, "repair latch", "--key", "broken", "--delete", "--force")...)
		expect(t, exitRefused, "no such key", cmdline(b, "repair latch", "--key", "broken", "--delete")...)
		sem, _ := semaphore.New(coord, "sem", 1)
		p, err := sem.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		expect(t, exitRefused, "holds a semaphore, not a latch", cmdline(b, "repair latch", "--key", "sem", "--reset", "1")...)
		expect(t, exitUsage, "give --reset N or --delete", cmdline(b, "repair latch", "--key", "sem")...)
	})
}

// A missing key is said in one line, "no such key", exit 1, by every
// command that reads a key of a kind: it is neither corrupt nor of
// another kind.
func TestMissingKeyOneLine(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, args := range [][]string{
			{"inspect", "nokey"},
			{"idempotency show", "--key", "nokey"},
			{"idempotency show", "--key", "nokey", "--result"},
			{"idempotency forget", "--key", "nokey"},
			{"repair claim", "--key", "nokey"},
			{"repair latch", "--key", "nokey", "--delete"},
			{"repair latch", "--key", "nokey", "--reset", "1"},
			{"repair semaphore", "--key", "nokey", "--list"},
			{"repair semaphore", "--key", "nokey", "--permit", "abc"},
		} {
			code, out, errOut := runCmd(t, cmdline(b, args[0], args[1:]...)...)
			if code != exitRefused || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `no such key "`+b.Prefix()+`nokey"`) ||
				strings.Contains(errOut, "CORRUPT") || strings.Contains(errOut, "wrong kind") {
				t.Errorf("coordctl %s: exit %d\nstdout %q\nstderr %q\nwant 1 and one line: no such key", strings.Join(args, " "), code, out, errOut)
			}
		}
		// --json still prints the object (kind "missing", no problem).
		code, out, _ := runCmd(t, cmdline(b, "inspect", "nokey", "--json")...)
		if code != exitRefused || !strings.Contains(out, `"kind":"missing"`) || strings.Contains(out, "problem") {
			t.Errorf("inspect --json of a missing key: %d %q", code, out)
		}
	})
}

// A middleware claim in the default (empty) namespace is reached with
// --namespace "" (idempotency:0::K), and --result shows the HTTP response
// it stored, not its internal encoding.
func TestIdempotencyMiddlewareDefaultNamespace(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		st, err := idempotency.New(b.Coordinator(t))
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idempotency.NewMiddleware(st, idempotency.WithKeyRequired(true))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"payment":1}`)
		}))
		req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("x"))
		req.Header.Set(idempotency.HeaderKey, "K7")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Fatalf("middleware answered %d", rec.Code)
		}
		expect(t, exitRefused, "no such key", cmdline(b, "idempotency show", "--key", "K7")...)
		expect(t, exitOK, "completed", cmdline(b, "idempotency show", "--key", "K7", "--namespace", "")...)
		out := expect(t, exitOK, "HTTP 201 Created", cmdline(b, "idempotency show", "--key", "K7", "--namespace=", "--result")...)
		if !strings.Contains(out, "\n\n{\"payment\":1}\n") || !strings.Contains(out, "Content-Type: application/json") {
			t.Fatalf("--result of a middleware claim:\n%s", out)
		}
		expect(t, exitRefused, "is completed, not pending", cmdline(b, "repair claim", "--key", "K7", "--namespace", "")...)
		expect(t, exitOK, `deleted the completed claim at "`+b.Key("idempotency:0::K7")+`"`, cmdline(b, "idempotency forget", "--key", "K7", "--namespace", "")...)
	})
}
