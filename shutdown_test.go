package coordination_test

import (
	"context"
	"errors"
	"testing"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Shutdown checks its arguments, sends nothing when nothing is pending,
// and is idempotent under concurrent calls.
func TestShutdownValidatesAndIsIdempotent(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	client := b.Client(t)
	counter := testharness.CountCommands(client)
	coord, err := coordination.New(client)
	if err != nil {
		t.Fatal(err)
	}
	var nilCoord *coordination.Coordinator
	if err := nilCoord.Shutdown(context.Background()); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Shutdown of a nil coordinator: %v, want ErrInvalidArgument", err)
	}
	var nilCtx context.Context
	if err := coord.Shutdown(nilCtx); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Shutdown(nil): %v, want ErrInvalidArgument", err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- coord.Shutdown(context.Background()) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Shutdown: %v", err)
		}
	}
	if err := coord.Shutdown(context.Background()); err != nil {
		t.Errorf("a later Shutdown: %v", err)
	}
	if n := counter.Count(); n != 0 {
		t.Errorf("Shutdown sent %d commands: %v", n, counter.Names())
	}
}
