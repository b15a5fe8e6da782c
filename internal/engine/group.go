package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
)

// AdmitGroup admits one operation of a primitive that spans several
// engines (a Redlock group over independent deployments): through each
// engine's hooks, in the order of es, before any Redis work, each exactly
// once. The first rejection stops it: the hooks already admitted learn the
// outcome Failed with the rejecting error (in reverse order, as in a
// [hooks.Chain]), and the error, naming the operation and wrapping the
// hook's, is returned; the caller must not touch Redis. The context each
// hook returns is passed to the next. When any engine of es was shut down
// ([Engine.Shutdown]) it refuses the operation with an error wrapping
// [sentinel.ErrClosed], before any hook. A nil ctx is refused first, with
// [check.NilContext] naming the operation and the key, as [Engine.Admit]
// does.
//
// The returned Op reports the outcome to every admitted hook (in reverse
// order) and records coordination.operation.duration once, on the first
// engine's meter: one group operation is one measurement, however many
// engines share a meter provider; likewise it is one span, of the first
// engine's tracer.
func AdmitGroup(ctx context.Context, es []*Engine, name, primitive string, keys ...Keys) (context.Context, Op, error) {
	var k Keys
	if len(keys) > 0 {
		k = keys[0]
	}
	if ctx == nil {
		return ctx, Op{}, OpError(name, k, check.NilContext())
	}
	if err := ClosedAny(es); err != nil {
		return ctx, Op{}, &opError{op: name, key: k.name, named: k.named, field: k.field, err: err}
	}
	op := Op{e: es[0], name: name, primitive: primitive, start: time.Now(), keys: k}
	var dones []hooks.Done
	for _, e := range es {
		if len(e.hooks) == 0 {
			continue
		}
		next, done, err := e.hooks.Admit(ctx, hooks.Operation{Name: name, Primitive: primitive})
		if err != nil {
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](hooks.Failed, err)
			}
			return ctx, Op{}, &opError{op: name, key: k.name, named: k.named, field: k.field, err: fmt.Errorf("rejected by hook: %w", err)}
		}
		if next != nil {
			ctx = next
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	switch len(dones) {
	case 0:
	case 1:
		op.done = dones[0]
	default:
		op.done = func(o hooks.Outcome, err error) {
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](o, err)
			}
		}
	}
	if t := &es[0].tracing; t.on() {
		ctx, op.span, op.wait = t.start(ctx, name)
	}
	return ctx, op, nil
}
