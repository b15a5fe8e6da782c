package hooks_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordkit/coordination/hooks"
)

// A hook that refuses lock acquisitions during a maintenance window and
// reports the outcome of everything else.
func Example() {
	maintenance := true
	h := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
		if maintenance && op.Name == hooks.LockAcquire {
			return ctx, nil, errors.New("maintenance window: no new locks")
		}
		return ctx, func(o hooks.Outcome, err error) {
			fmt.Printf("%s (%s): %s\n", op.Name, op.Primitive, o)
		}, nil
	})
	// coordination.New(client, coordination.WithHooks(h)) installs it; here
	// we call it directly.
	_, _, err := h.Admit(context.Background(), hooks.Operation{Name: hooks.LockAcquire, Primitive: "lock"})
	fmt.Println("acquire:", err)
	_, done, _ := h.Admit(context.Background(), hooks.Operation{Name: hooks.LockRelease, Primitive: "lock"})
	done(hooks.Succeeded, nil)
	// Output:
	// acquire: maintenance window: no new locks
	// LOCK RELEASE (lock): succeeded
}
