package testharness

import (
	"context"
	"sync"

	"github.com/coordkit/coordination/hooks"
)

// HookRecorder is an operation hook for tests (install it with
// coordination.WithHooks). It records every finished operation as
// "primitive:NAME:outcome", e.g. "lock:LOCK ACQUIRE:succeeded", and rejects
// every admission with the error given to [HookRecorder.Reject] until that
// is reset to nil. The zero value admits everything. It is safe for
// concurrent use.
type HookRecorder struct {
	mu     sync.Mutex
	ops    []string
	reject error
}

var _ hooks.Hook = (*HookRecorder)(nil)

// Admit implements hooks.Hook.
func (r *HookRecorder) Admit(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reject != nil {
		return ctx, nil, r.reject
	}
	return ctx, func(o hooks.Outcome, _ error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ops = append(r.ops, op.Primitive+":"+op.Name+":"+o.String())
	}, nil
}

// Reject makes every later admission fail with err; nil admits again.
func (r *HookRecorder) Reject(err error) {
	r.mu.Lock()
	r.reject = err
	r.mu.Unlock()
}

// Ops returns the operations finished so far, in order.
func (r *HookRecorder) Ops() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}
