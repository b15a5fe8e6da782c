package coordination_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/ratelimit"
)

// notOperations are exported functions taking a context that are not
// operations of a primitive: hooks (called by the library with the
// operation's context) and a context accessor.
var notOperations = map[string]bool{
	"hooks.(Chain).Admit":                   true,
	"hooks.(Func).Admit":                    true,
	"idempotency.FenceFrom":                 true, // reads ctx; a nil one holds no fence
	"ratelimit.(*ConcurrencyLease).Context": true,
}

// publicContextFuncs lists the exported functions and methods (of
// exported types) of the module's public packages whose parameters
// include a context.Context, as "pkg.Func" or "pkg.(*Type).Method".
func publicContextFuncs(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch n := d.Name(); {
			case p != "." && (n == "internal" || n == "cmd" || n == "examples" || n == "bench" || n == "testdata" || strings.HasPrefix(n, ".")):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || !takesContext(fd.Type) {
				continue
			}
			name := f.Name.Name + "." + fd.Name.Name
			if fd.Recv != nil {
				typ, star := fd.Recv.List[0].Type, ""
				if s, ok := typ.(*ast.StarExpr); ok {
					typ, star = s.X, "*"
				}
				id, ok := typ.(*ast.Ident)
				if !ok || !id.IsExported() {
					continue
				}
				name = f.Name.Name + ".(" + star + id.Name + ")." + fd.Name.Name
			}
			out = append(out, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func takesContext(ft *ast.FuncType) bool {
	for _, f := range ft.Params.List {
		if se, ok := f.Type.(*ast.SelectorExpr); ok && se.Sel.Name == "Context" {
			if x, ok := se.X.(*ast.Ident); ok && x.Name == "context" {
				return true
			}
		}
	}
	return false
}

// Every public operation taking a context returns an error wrapping
// ErrInvalidArgument naming "ctx" for a nil one, and sends nothing. The
// table must list every such function of the public packages (found in
// their source): a new operation without a case fails the test.
func TestNilContextIsInvalidArgument(t *testing.T) {
	funcs := publicContextFuncs(t)
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		bg := context.Background()
		f := newEverything(t, b)
		coord := f.coord

		owner := must(engine.NewToken())(t)
		var ctx context.Context // nil
		term := endedTerm(t, coord)
		calls := map[string]func() error{
			// The lease methods every held lease embeds (each handle's
			// promoted method is called below too).
			"coordination.(*Coordinator).Shutdown": func() error { return coord.Shutdown(ctx) },
			"coordination.(*Lease).Refresh":        func() error { _, err := f.lk.Lease.Refresh(ctx, time.Minute); return err },
			"coordination.(*Lease).Release":        func() error { _, err := f.lk.Lease.Release(ctx); return err },
			"coordination.(*Lease).Verify":         func() error { _, err := f.lk.Lease.Verify(ctx); return err },
			"fencing.(*Lock).Refresh":              func() error { _, err := f.fl.Refresh(ctx, time.Minute); return err },
			"fencing.(*Lock).Release":              func() error { _, err := f.fl.Release(ctx); return err },
			"fencing.(*Lock).Verify":               func() error { _, err := f.fl.Verify(ctx); return err },
			"fencing.(*Mutex).Acquire":             func() error { _, err := f.fm.Acquire(ctx, time.Minute); return err },
			"fencing.(*Mutex).TryAcquire":          func() error { _, err := f.fm.TryAcquire(ctx, time.Minute); return err },
			"fencing.(*Mutex).Adopt":               func() error { _, err := f.fm.Adopt(ctx, owner); return err },
			"fencing.(*Mutex).Holder":              func() error { _, err := f.fm.Holder(ctx); return err },
			"fencing.(*Mutex).ForceRelease":        func() error { _, err := f.fm.ForceRelease(ctx, owner); return err },
			"lock.(*Mutex).Adopt":                  func() error { _, err := f.mu.Adopt(ctx, owner); return err },
			"lock.(*Mutex).Holder":                 func() error { _, err := f.mu.Holder(ctx); return err },
			"lock.(*Mutex).ForceRelease":           func() error { _, err := f.mu.ForceRelease(ctx, owner); return err },
			"lock.(*FieldSet).Adopt":               func() error { _, err := f.fields.Adopt(ctx, "f", owner); return err },
			"lock.(*FieldSet).Holder":              func() error { _, err := f.fields.Holder(ctx, "f"); return err },
			"lock.(*FieldSet).ForceRelease":        func() error { _, err := f.fields.ForceRelease(ctx, "f", owner); return err },
			"rwlease.(*RWMutex).Adopt":             func() error { _, err := f.rwm.Adopt(ctx, owner); return err },
			"rwlease.(*RWMutex).Holders":           func() error { _, err := f.rwm.Holders(ctx); return err },
			"rwlease.(*RWMutex).ForceRelease":      func() error { _, err := f.rwm.ForceRelease(ctx, owner); return err },
			"semaphore.(*Semaphore).Adopt":         func() error { _, err := f.sem.Adopt(ctx, owner); return err },
			"semaphore.(*Semaphore).Holders":       func() error { _, err := f.sem.Holders(ctx); return err },
			"semaphore.(*Semaphore).ForceRelease":  func() error { _, err := f.sem.ForceRelease(ctx, owner); return err },
			"fencing.(*Guarded).Get":               func() error { _, _, _, err := f.guarded.Get(ctx); return err },
			"fencing.(*Guarded).Set":               func() error { _, _, err := f.guarded.Set(ctx, 1, []byte("v"), 0); return err },
			"idempotency.(*Store).Abandon":         func() error { _, err := f.store.Abandon(ctx, "k", owner); return err },
			"idempotency.(*Store).Forget":          func() error { _, err := f.store.Forget(ctx, "k"); return err },
			"idempotency.(*Store).Fail":            func() error { _, err := f.store.Fail(ctx, "k", owner); return err },
			"idempotency.DoValue": func() error {
				_, _, err := idempotency.DoValue(ctx, f.store, "k", time.Minute, "", idempotency.JSONCodec[int](),
					func(context.Context) (int, error) { return 1, nil })
				return err
			},
			"ratelimit.ReportCost":          func() error { return ratelimit.ReportCost(ctx, 1) },
			"idempotency.(*Store).Begin":    func() error { _, err := f.store.Begin(ctx, "k", time.Minute); return err },
			"idempotency.(*Store).Complete": func() error { _, err := f.store.Complete(ctx, "k", owner, nil); return err },
			"idempotency.(*Store).Do": func() error {
				_, _, err := f.store.Do(ctx, "k", time.Minute, "", func(context.Context) ([]byte, error) { return nil, nil })
				return err
			},
			"idempotency.(*Store).KeepAlive": func() error {
				_, _, err := f.store.KeepAlive(ctx, "k", idempotency.Claim{State: idempotency.Started, Owner: owner}, time.Minute)
				return err
			},
			"latch.(*Generation).Count":     func() error { _, err := f.gen.Count(ctx); return err },
			"latch.(*Generation).CountDown": func() error { _, err := f.gen.CountDown(ctx); return err },
			"latch.(*Generation).Wait":      func() error { _, err := f.gen.Wait(ctx); return err },
			"latch.(*Latch).Create":         func() error { _, err := f.lt.Create(ctx, 1); return err },
			"latch.(*Latch).Join":           func() error { _, err := f.lt.Join(ctx); return err },
			"latch.(*Latch).Reset":          func() error { _, err := f.lt.Reset(ctx, 1); return err },
			"leader.(*Elector).Leader":      func() error { _, err := f.el.Leader(ctx); return err },
			"leader.(*Elector).Run":         func() error { return f.el.Run(ctx) },
			"leader.Get":                    func() error { _, err := leader.Get(ctx, coord, "{nil}:leader"); return err },
			"leader.(*Term).Proclaim":       func() error { return term.Proclaim(ctx, "x") },
			"leader.Observe": func() error {
				return leader.Observe(ctx, coord, "{nil}:leader", time.Second, func(leader.Info) {})
			},
			"lock.(*FieldLease).Refresh":                       func() error { _, err := f.field.Refresh(ctx, time.Minute); return err },
			"lock.(*FieldLease).Release":                       func() error { _, err := f.field.Release(ctx); return err },
			"lock.(*FieldLease).Verify":                        func() error { _, err := f.field.Verify(ctx); return err },
			"lock.(*Lock).Refresh":                             func() error { _, err := f.lk.Refresh(ctx, time.Minute); return err },
			"lock.(*Lock).Release":                             func() error { _, err := f.lk.Release(ctx); return err },
			"lock.(*Lock).Verify":                              func() error { _, err := f.lk.Verify(ctx); return err },
			"lock.(*FieldSet).Acquire":                         func() error { _, err := f.fields.Acquire(ctx, "f", time.Minute); return err },
			"lock.(*FieldSet).TryAcquire":                      func() error { _, err := f.fields.TryAcquire(ctx, "f", time.Minute); return err },
			"lock.(*Mutex).Acquire":                            func() error { _, err := f.mu.Acquire(ctx, time.Minute); return err },
			"lock.(*Mutex).TryAcquire":                         func() error { _, err := f.mu.TryAcquire(ctx, time.Minute); return err },
			"ratelimit.(*DenyList).Denied":                     func() error { _, err := f.deny.Denied(ctx, "who"); return err },
			"ratelimit.(*DenyList).Deny":                       func() error { return f.deny.Deny(ctx, "who") },
			"ratelimit.(*DenyList).Remove":                     func() error { return f.deny.Remove(ctx, "who") },
			"ratelimit.(*DenyList).DenyFor":                    func() error { return f.deny.DenyFor(ctx, "who", time.Minute) },
			"ratelimit.(*Limiter).Reset":                       func() error { return f.fixed.Reset(ctx) },
			"ratelimit.(*Limiter).Peek":                        func() error { _, err := f.fixed.Peek(ctx); return err },
			"ratelimit.(*Limiter).Penalize":                    func() error { _, err := f.fixed.Penalize(ctx, 1); return err },
			"ratelimit.(*Limiter).Reward":                      func() error { _, err := f.fixed.Reward(ctx, 1); return err },
			"ratelimit.(*AllowList).Allowed":                   func() error { _, err := f.allow.Allowed(ctx, "who"); return err },
			"ratelimit.(*AllowList).Allow":                     func() error { return f.allow.Allow(ctx, "who") },
			"ratelimit.(*AllowList).Remove":                    func() error { return f.allow.Remove(ctx, "who") },
			"ratelimit.(*Limiter).Allow":                       func() error { _, err := f.fixed.Allow(ctx, 1); return err },
			"ratelimit.(*Limiter).Reserve":                     func() error { _, err := f.bucket.Reserve(ctx, 1); return err },
			"ratelimit.(*Limiter).Update":                      func() error { return f.fixed.Update(ctx, ratelimit.FixedWindow{Limit: 10, Window: time.Minute}) },
			"ratelimit.(*Limiter).Wait":                        func() error { _, err := f.fixed.Wait(ctx, 1); return err },
			"ratelimit.(*Partitioned).Allow":                   func() error { _, err := f.part.Allow(ctx, "p", 1); return err },
			"ratelimit.(*Partitioned).Wait":                    func() error { _, err := f.part.Wait(ctx, "p", 1); return err },
			"ratelimit.(*Partitioned).UpdateAll":               func() error { return f.part.UpdateAll(ctx, ratelimit.FixedWindow{Limit: 10, Window: time.Minute}) },
			"ratelimit.(*PartitionedConcurrency).UpdateAll":    func() error { return f.pconc.UpdateAll(ctx, 2) },
			"ratelimit.(*ConcurrencyLease).Release":            func() error { _, err := f.held.Release(ctx); return err },
			"ratelimit.(*ConcurrencyLimiter).TryAcquire":       func() error { _, err := f.conc.TryAcquire(ctx, 1); return err },
			"ratelimit.(*ConcurrencyLimiter).Acquire":          func() error { _, err := f.conc.Acquire(ctx, 1); return err },
			"ratelimit.(*ConcurrencyLimiter).Update":           func() error { return f.conc.Update(ctx, 2) },
			"ratelimit.(*ConcurrencyLimiter).Adopt":            func() error { _, err := f.conc.Adopt(ctx, owner); return err },
			"ratelimit.(*ConcurrencyLimiter).Holders":          func() error { _, err := f.conc.Holders(ctx); return err },
			"ratelimit.(*ConcurrencyLimiter).ForceRelease":     func() error { _, err := f.conc.ForceRelease(ctx, owner); return err },
			"ratelimit.(*PartitionedConcurrency).TryAcquire":   func() error { _, err := f.pconc.TryAcquire(ctx, "p", 1); return err },
			"ratelimit.(*PartitionedConcurrency).Acquire":      func() error { _, err := f.pconc.Acquire(ctx, "p", 1); return err },
			"ratelimit.(*PartitionedConcurrency).Adopt":        func() error { _, err := f.pconc.Adopt(ctx, "p", owner); return err },
			"ratelimit.(*PartitionedConcurrency).Holders":      func() error { _, err := f.pconc.Holders(ctx, "p"); return err },
			"ratelimit.(*PartitionedConcurrency).ForceRelease": func() error { _, err := f.pconc.ForceRelease(ctx, "p", owner); return err },
			"ratelimit.(*Reservation).Settle":                  func() error { _, err := f.reserved.Settle(ctx, 1); return err },
			"redlock.(*Group).Acquire":                         func() error { _, err := f.group.Acquire(ctx, "k", time.Minute); return err },
			"redlock.(*Group).Adopt":                           func() error { _, err := f.group.Adopt(ctx, "k", owner); return err },
			"redlock.(*Group).Holder":                          func() error { _, err := f.group.Holder(ctx, "k"); return err },
			"redlock.(*Group).ForceRelease":                    func() error { _, err := f.group.ForceRelease(ctx, "k", owner); return err },
			"redlock.(*Group).TryAcquire":                      func() error { _, err := f.group.TryAcquire(ctx, "k", time.Minute); return err },
			"redlock.(*Lock).Refresh":                          func() error { _, err := f.rl.Refresh(ctx, time.Minute); return err },
			"redlock.(*Lock).Release":                          func() error { _, err := f.rl.Release(ctx); return err },
			"redlock.(*Lock).Verify":                           func() error { _, err := f.rl.Verify(ctx); return err },
			"rwlease.(*Lease).Refresh":                         func() error { _, err := f.rw.Refresh(ctx, time.Minute); return err },
			"rwlease.(*Lease).Release":                         func() error { _, err := f.rw.Release(ctx); return err },
			"rwlease.(*Lease).Verify":                          func() error { _, err := f.rw.Verify(ctx); return err },
			"rwlease.(*RWMutex).Read":                          func() error { _, err := f.rwm.Read(ctx, time.Minute); return err },
			"rwlease.(*RWMutex).TryRead":                       func() error { _, err := f.rwm.TryRead(ctx, time.Minute); return err },
			"rwlease.(*RWMutex).TryWrite":                      func() error { _, err := f.rwm.TryWrite(ctx, time.Minute); return err },
			"rwlease.(*RWMutex).Write":                         func() error { _, err := f.rwm.Write(ctx, time.Minute); return err },
			"semaphore.(*Permit).Refresh":                      func() error { _, err := f.permit.Refresh(ctx, time.Minute); return err },
			"semaphore.(*Permit).Release":                      func() error { _, err := f.permit.Release(ctx); return err },
			"semaphore.(*Permit).Verify":                       func() error { _, err := f.permit.Verify(ctx); return err },
			"semaphore.(*Semaphore).Acquire":                   func() error { _, err := f.sem.Acquire(ctx, time.Minute); return err },
			"semaphore.(*Semaphore).AcquireN":                  func() error { _, err := f.sem.AcquireN(ctx, 1, time.Minute); return err },
			"semaphore.(*Semaphore).State":                     func() error { _, err := f.sem.State(ctx); return err },
			"semaphore.(*Semaphore).SetCapacity":               func() error { return f.sem.SetCapacity(ctx, 3) },
			"semaphore.(*Semaphore).Drain":                     func() error { return f.sem.Drain(ctx) },
			"semaphore.(*Semaphore).Resume":                    func() error { return f.sem.Resume(ctx) },
			"semaphore.(*Semaphore).TryAcquire":                func() error { _, err := f.sem.TryAcquire(ctx, time.Minute); return err },
			"semaphore.(*Semaphore).TryAcquireN":               func() error { _, err := f.sem.TryAcquireN(ctx, 1, time.Minute); return err },
		}
		if len(funcs) < 50 {
			t.Fatalf("found %d public functions taking a context: %q; the source walk is broken", len(funcs), funcs)
		}
		counter := testharness.CountCommands(f.client)
		for _, name := range funcs {
			if notOperations[name] {
				continue
			}
			call, ok := calls[name]
			if !ok {
				t.Errorf("%s takes a context but has no nil-context case here", name)
				continue
			}
			t.Run(name, func(t *testing.T) {
				counter.Reset()
				err := callNoPanic(call)
				if arg, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || arg != "ctx" {
					t.Errorf("with a nil context: %v, want ErrInvalidArgument naming ctx", err)
				}
				// A primitive's operation names itself and its key, as its
				// other errors do; the coordinator's Shutdown is no such
				// operation, and UpdateAll of a partitioned limiter has
				// no one key (every partition's): it names the operation
				// alone.
				if !keyless[name] && (err == nil || !namedCtxError.MatchString(err.Error())) {
					t.Errorf("with a nil context: %v, want `coordination: OPERATION \"KEY\": invalid argument ctx: ...`", err)
				}
				if strings.HasSuffix(name, ".UpdateAll") && (err == nil || !keylessCtxError.MatchString(err.Error())) {
					t.Errorf("with a nil context: %v, want `coordination: rate limit update: invalid argument ctx: ...`", err)
				}
				if n := counter.Count(); n != 0 {
					t.Errorf("with a nil context it sent %v", counter.Names())
				}
			})
		}
		if fence, ok := idempotency.FenceFrom(nil); ok || fence != 0 { //nolint:staticcheck // a nil context on purpose
			t.Errorf("FenceFrom(nil) = %d, %v; want 0, false", fence, ok)
		}
		for _, h := range []interface {
			Release(context.Context) (coordination.ReleaseOutcome, error)
		}{f.lk, f.fl, f.rw, f.permit} {
			_, _ = h.Release(bg)
		}
		if f.field != nil {
			_, _ = f.field.Release(bg)
		}
		_, _ = f.rl.Release(bg)
		_, _ = f.held.Release(bg)
	})
}

// namedCtxError is the error of a primitive's operation given a nil
// context: it names the operation (lower case) and the key.
// keyless are the operations whose errors name no key: the coordinator's
// Shutdown, and UpdateAll of the partitioned limiters (every partition's
// keys).
var keyless = map[string]bool{
	"coordination.(*Coordinator).Shutdown":          true,
	"ratelimit.(*Partitioned).UpdateAll":            true,
	"ratelimit.(*PartitionedConcurrency).UpdateAll": true,
	"ratelimit.ReportCost":                          true, // no operation, no key: a request's note
}

var keylessCtxError = regexp.MustCompile(`^coordination: rate limit update: invalid argument ctx: must not be nil; `)

var namedCtxError = regexp.MustCompile(`^coordination: [a-z ]+ "[^"]+"( field "[^"]+")?: invalid argument ctx: must not be nil; `)

func callNoPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("panic: " + strings.TrimSpace(strings.Split(errString(r), "\n")[0]))
		}
	}()
	return f()
}

func errString(r any) string {
	if e, ok := r.(error); ok {
		return e.Error()
	}
	if s, ok := r.(string); ok {
		return s
	}
	return "non-error panic"
}

// endedTerm returns a term of an election on coord, ended (its elector
// resigned at once), for the nil-context case of Term.Proclaim.
func endedTerm(t *testing.T, coord *coordination.Coordinator) *leader.Term {
	t.Helper()
	terms := make(chan *leader.Term, 1)
	el, err := leader.New(coord, "{nilterm}:leader", "{nilterm}:fence", "me",
		leader.OnElected(func(_ context.Context, term *leader.Term) error {
			terms <- term
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	term := <-terms
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return term
}
