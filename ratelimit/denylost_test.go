package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A deny-list write whose reply is lost is not sent again: a re-send
// could run after another client's later write and undo it (a Remove
// re-sent after a DenyFor lifted the new denial; the deny list's checked
// histories caught it). The caller gets an ambiguous error; the write ran
// once.
func TestDenyListWriteIsSentOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		p := faultproxy.Start(t, b.Server.Addr)
		opt := b.Server.Options()
		opt.Addr = p.Addr()
		opt.ReadTimeout = 300 * time.Millisecond // go-redis would re-send after it, MaxRetries 3
		client := redis.NewClient(opt)
		defer client.Close()
		ctx := context.Background()
		dl, err := NewDenyList(withClient(t, b, client), "lost-deny", WithDenyCache(1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := dl.Deny(ctx, "warm"); err != nil { // scripts loaded
			t.Fatal(err)
		}
		sha := denyWriteScript.Hash()
		lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(sha), 1))
		// Counts what reaches the proxy after the lost one: a re-send.
		resent := p.Apply(faultproxy.DelayCommand(faultproxy.ScriptSHA(sha), time.Nanosecond, faultproxy.Forever))
		err = dl.Remove(ctx, "warm")
		lost.Remove()
		resent.Remove()
		if !coordination.IsAmbiguous(err) {
			t.Fatalf("Remove with its reply lost = %v, want an ambiguous error", err)
		}
		if n := resent.Fired(); n != 0 {
			t.Fatalf("the write was re-sent %d times, want never", n)
		}
		if denied, err := dl.Denied(ctx, "warm"); err != nil || denied {
			t.Fatalf("after the lost Remove: denied %v, %v; want removed (it ran)", denied, err)
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}
