package hooks_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/coordkit/coordination/hooks"
)

type probe struct {
	name   string
	log    *[]string
	reject error
}

type ctxKey string

func (p probe) Admit(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
	*p.log = append(*p.log, p.name+" admit "+op.Name)
	if p.reject != nil {
		return ctx, nil, p.reject
	}
	return context.WithValue(ctx, ctxKey(p.name), true), func(o hooks.Outcome, err error) {
		*p.log = append(*p.log, p.name+" done "+o.String())
	}, nil
}

func TestChainOrderAndContext(t *testing.T) {
	var log []string
	c := hooks.Chain{probe{"a", &log, nil}, nil, probe{"b", &log, nil}}
	ctx, done, err := c.Admit(context.Background(), hooks.Operation{Name: hooks.LockAcquire, Primitive: "lock"})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Value(ctxKey("a")) != true || ctx.Value(ctxKey("b")) != true {
		t.Fatal("the chain did not pass each hook's context on")
	}
	done(hooks.Succeeded, nil)
	want := []string{"a admit LOCK ACQUIRE", "b admit LOCK ACQUIRE", "b done succeeded", "a done succeeded"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("log %v, want %v", log, want)
	}
}

func TestChainRejection(t *testing.T) {
	var log []string
	no := errors.New("no")
	c := hooks.Chain{probe{"a", &log, nil}, probe{"b", &log, no}, probe{"c", &log, nil}}
	_, done, err := c.Admit(context.Background(), hooks.Operation{Name: hooks.LockRelease})
	if !errors.Is(err, no) || done != nil {
		t.Fatalf("err %v done %v", err, done != nil)
	}
	want := []string{"a admit LOCK RELEASE", "b admit LOCK RELEASE", "a done failed"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("log %v, want %v", log, want)
	}
}

func TestEmptyChainAndFunc(t *testing.T) {
	ctx := context.Background()
	if c, d, err := (hooks.Chain{}).Admit(ctx, hooks.Operation{}); c != ctx || d != nil || err != nil {
		t.Fatal("empty chain")
	}
	called := false
	f := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
		called = op.Name == hooks.RateLimitAcquire
		return ctx, nil, nil
	})
	if _, _, err := f.Admit(ctx, hooks.Operation{Name: hooks.RateLimitAcquire}); err != nil || !called {
		t.Fatal("Func")
	}
	for o, s := range map[hooks.Outcome]string{hooks.Succeeded: "succeeded", hooks.Canceled: "canceled", hooks.Failed: "failed", 9: "Outcome(9)"} {
		if o.String() != s {
			t.Errorf("%d.String() = %q", o, o.String())
		}
	}
}
