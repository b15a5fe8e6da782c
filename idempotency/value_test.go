package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

type receipt struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	note   string // unexported: not stored by the JSON codec
}

// DoValue runs fn once, stores its value through the codec and replays the
// decoded value; bad codecs and stored bytes of another shape give errors,
// an encoding failure marks the claim failed, nil arguments send nothing.
func TestDoValue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		codec := idempotency.JSONCodec[receipt]()
		var runs atomic.Int32
		charge := func(context.Context) (receipt, error) {
			runs.Add(1)
			return receipt{ID: "r-7", Amount: 100, note: "local"}, nil
		}
		v, replayed, err := idempotency.DoValue(ctx, f.store, "order", time.Minute, "fp", codec, charge)
		if err != nil || replayed || v != (receipt{ID: "r-7", Amount: 100, note: "local"}) {
			t.Fatalf("first DoValue = %+v, %v, %v; want fn's own value", v, replayed, err)
		}
		v, replayed, err = idempotency.DoValue(ctx, f.store, "order", time.Minute, "fp", codec, charge)
		if err != nil || !replayed || v != (receipt{ID: "r-7", Amount: 100}) {
			t.Fatalf("replay = %+v, %v, %v; want the decoded value", v, replayed, err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times", n)
		}
		raw, err := f.raw.Get(ctx, b.Key("order")).Result()
		if err != nil || !strings.HasSuffix(raw, `{"id":"r-7","amount":100}`) {
			t.Fatalf("stored %q, %v", raw, err)
		}

		// Stored bytes the codec cannot read.
		if _, _, err := f.store.Do(ctx, "bytes", time.Minute, "fp", func(context.Context) ([]byte, error) { return []byte("not json"), nil }); err != nil {
			t.Fatal(err)
		}
		var syntax *json.SyntaxError
		v, replayed, err = idempotency.DoValue(ctx, f.store, "bytes", time.Minute, "fp", codec, charge)
		if !errors.As(err, &syntax) || replayed || v != (receipt{}) || !strings.Contains(err.Error(), "idempotency begin") {
			t.Fatalf("undecodable replay = %+v, %v, %v; want the zero value and the decode error", v, replayed, err)
		}

		// A value the codec cannot encode: the claim is marked failed.
		bad := idempotency.JSONCodec[func()]()
		_, _, err = idempotency.DoValue(ctx, f.store, "enc", time.Minute, "fp", bad, func(context.Context) (func(), error) { return func() {}, nil })
		var unsupported *json.UnsupportedTypeError
		// It names the operation that could not store the result and the key,
		// as every other error of Do does.
		if want := `coordination: idempotency complete "enc": result not encoded: json: unsupported type: func()`; !errors.As(err, &unsupported) || err.Error() != want {
			t.Fatalf("encode failure = %v, want %q wrapping json's error", err, want)
		}
		wantState(t, f.begin(t, "enc", time.Minute, idempotency.WithFingerprint("fp")), idempotency.Failed)

		counter := testharness.CountCommands(f.coord.Client())
		for _, c := range []struct {
			arg string
			err error
		}{
			{"codec", third(idempotency.DoValue(ctx, f.store, "k", time.Minute, "", nil, charge))},
			{"fn", third(idempotency.DoValue[receipt](ctx, f.store, "k", time.Minute, "", codec, nil))},
			{"key", third(idempotency.DoValue(ctx, f.store, "", time.Minute, "", nil, charge))},
			{"store", third(idempotency.DoValue(ctx, nil, "k", time.Minute, "", codec, charge))},
			{"ttl", third(idempotency.DoValue(ctx, f.store, "k", 0, "", codec, charge))},
		} {
			if name, ok := check.ArgumentName(c.err); !errors.Is(c.err, coordination.ErrInvalidArgument) || !ok || name != c.arg {
				t.Errorf("err = %v, want an invalid-argument error naming %q", c.err, c.arg)
			}
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands", n)
		}
	})
}

// A distributed single-flight: of 8 callers arriving together with one key
// and WithWait, one runs fn and the other 7 get its result replayed, as
// soon as it is stored.
func TestDoValueSingleFlight(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		var runs, replays atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				v, replayed, err := idempotency.DoValue(t.Context(), f.store, "report:2026-12", time.Minute, "",
					idempotency.JSONCodec[int](), func(context.Context) (int, error) {
						runs.Add(1)
						time.Sleep(200 * time.Millisecond)
						return 42, nil
					}, idempotency.WithWait(30*time.Second))
				if err == nil && v != 42 {
					err = errors.New("wrong value")
				}
				if replayed {
					replays.Add(1)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if runs.Load() != 1 || replays.Load() != 7 {
			t.Fatalf("runs %d, replays %d; want 1 and 7", runs.Load(), replays.Load())
		}
	})
}

// A result over the 16 MiB bound is not stored: Do marks the claim failed
// and names the argument.
func TestDoResultTooLarge(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		big := make([]byte, 16<<20+1)
		res, _, err := f.store.Do(t.Context(), "big", time.Minute, "", func(context.Context) ([]byte, error) { return big, nil })
		if name, _ := check.ArgumentName(err); name != "result" || len(res) != len(big) {
			t.Fatalf("Do = %d bytes, %v; want the result and an error naming result", len(res), err)
		}
		wantState(t, f.begin(t, "big", time.Minute, idempotency.WithFingerprint("")), idempotency.Failed)
	})
}
