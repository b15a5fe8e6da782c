package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// TryAcquire while the semaphore drains says so, still matching
// ErrNotAcquired (it used to read a bare "not acquired", as for a
// semaphore whose permits are all held), in either order, with a permit
// held or none; one script as before; a refusal for want of free permits
// keeps its text. After Resume it is granted.
func TestTryAcquireWhileDrainingSaysSo(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, fifo := range []bool{false, true} {
			ctx := context.Background()
			name := "drain"
			if fifo {
				name = "drain-fifo"
			}
			c := b.Coordinator(t)
			s, err := semaphore.New(c, name, 1, semaphore.WithFIFO(fifo))
			if err != nil {
				t.Fatal(err)
			}
			held, err := s.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			full := `coordination: semaphore acquire "` + name + `": not acquired`
			if _, err := s.TryAcquire(ctx, time.Minute); err == nil || err.Error() != full || !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("fifo=%v: TryAcquire with every permit held = %v, want %q", fifo, err, full)
			}
			dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_ = s.Drain(dctx) // a permit is held: it gives up, the drain stays
			cancel()
			want := `coordination: semaphore acquire "` + name + `": not acquired: the semaphore is draining (nothing is granted until Resume)`
			counter := testharness.CountCommands(c.Client())
			if _, err := s.TryAcquire(ctx, time.Minute); err == nil || err.Error() != want || !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("fifo=%v: TryAcquire while draining, a permit held = %v, want %q matching ErrNotAcquired", fifo, err, want)
			}
			if n := counter.Count(); n != 1 {
				t.Fatalf("fifo=%v: TryAcquire while draining sent %d commands, want 1", fifo, n)
			}
			if _, err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.TryAcquire(ctx, time.Minute); err == nil || err.Error() != want {
				t.Fatalf("fifo=%v: TryAcquire while draining, none held = %v, want %q", fifo, err, want)
			}
			if err := s.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			p, err := s.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatalf("fifo=%v: TryAcquire after Resume = %v", fifo, err)
			}
			if _, err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
