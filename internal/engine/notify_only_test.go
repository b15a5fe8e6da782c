package engine_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A watch made for one payload (a first-in first-out waiter's owner
// token) wakes only on a message with that payload; a watch without one
// wakes on every message of the key.
func TestWatchForOnePayload(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, _ := coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()))
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		e := eng(t, coord)
		full := b.Key("fifo")
		mine, err := engine.WatchFor(ctx, e, full, "tok-a")
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close()
		every, err := engine.WatchFor(ctx, e, full, "")
		if err != nil {
			t.Fatal(err)
		}
		defer every.Close()
		classic, shard := slot.Channels(full, "")
		admin := b.Admin(t)
		publish := func(msg string) {
			t.Helper()
			var err error
			if b.IsMini() {
				err = admin.Publish(ctx, classic, msg).Err()
			} else {
				err = admin.SPublish(ctx, shard, msg).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		woken := func(w *engine.Watch, within time.Duration) bool {
			select {
			case <-w.C():
				return true
			case <-time.After(within):
				return false
			}
		}
		publish("tok-b")
		if !woken(every, 10*time.Second) {
			t.Fatal("the watch without a payload was not woken")
		}
		if woken(mine, 200*time.Millisecond) {
			t.Fatal("another waiter's payload woke the watch for tok-a")
		}
		publish("tok-a")
		if !woken(mine, 10*time.Second) {
			t.Fatal("its own payload did not wake the watch for tok-a")
		}
		if !woken(every, 10*time.Second) {
			t.Fatal("the watch without a payload was not woken by the second message")
		}
	})
}
