package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// Codec turns the result of [DoValue]'s fn into the bytes stored for
// replay, and stored bytes back into a result. Encode must be
// deterministic enough that Decode of its output is the value a retry
// should see; both must be safe for concurrent use when DoValue is called
// from several goroutines.
type Codec[T any] interface {
	// Encode returns the bytes to store for v (at most 16 MiB, the bound
	// of [Store.Complete]).
	Encode(v T) ([]byte, error)
	// Decode returns the value that data, as Encode wrote it, stands for.
	Decode(data []byte) (T, error)
}

// JSONCodec returns a [Codec] that stores results as JSON with
// encoding/json (json.Marshal and json.Unmarshal), so T's exported fields
// and their `json` tags decide what is kept. It is safe for concurrent use.
func JSONCodec[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

// Encode returns json.Marshal(v): its errors are json's (an unsupported
// type or value, such as a func or a NaN).
func (jsonCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

// Decode returns the T that json.Unmarshal makes of data; its errors are
// json's (a syntax error, a type mismatch).
func (jsonCodec[T]) Decode(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// DoValue is [Store.Do] for a typed result: fn returns a T, which codec
// encodes for storage, and a replay returns codec's decoding of the stored
// bytes (so a retry gets what the first call's result became through the
// codec: for [JSONCodec], its JSON fields). The first, running call
// returns fn's own value. Everything else is as Do: at most one run per
// key while its claim lasts, [WithWait] to wait for a running original,
// [ErrInProgress], [ErrFingerprintMismatch], [ErrOutcomeUnknown],
// [ErrClaimLost] (with fn's value) and [RetrySafe] errors.
//
// Used with [WithWait], DoValue is a distributed single-flight: of the
// callers that come with the same key and fingerprint while the first one
// runs, only the first runs fn; the others wait for its result and return
// it decoded (see the package documentation).
//
// When codec.Encode fails after fn succeeded, fn's effects happened but
// no result can be stored: DoValue returns an error wrapping Encode's,
// naming IDEMPOTENCY COMPLETE and the key (`coordination: idempotency
// complete "KEY": result not encoded: ...`), and marks the claim failed,
// as for an error of fn that is not retry-safe. When a
// stored result does not decode, it returns an error wrapping Decode's,
// naming IDEMPOTENCY BEGIN and the key, and the zero T.
//
// Errors beside Do's: coordination.ErrInvalidArgument naming "codec" or
// "fn" when nil, with nothing sent. It is safe for concurrent use.
func DoValue[T any](ctx context.Context, s *Store, key string, ttl time.Duration, fingerprint string,
	codec Codec[T], fn func(ctx context.Context) (T, error), opts ...BeginOption) (result T, replayed bool, err error) {
	var zero T
	for _, bad := range []struct {
		name string
		nil  bool
	}{{"codec", codec == nil}, {"fn", fn == nil}} {
		if bad.nil {
			// Refused where Do would begin, naming that operation (nothing admitted).
			_, k, err := s.checkKey(hooks.IdempotencyBegin, key)
			if err != nil {
				return zero, false, err
			}
			return zero, false, engine.OpError(hooks.IdempotencyBegin, k, check.InvalidArgument(bad.name, "must not be nil"))
		}
	}
	var ran T
	stored, replayed, err := s.Do(ctx, key, ttl, fingerprint, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		data, err := codec.Encode(v)
		if err != nil {
			// Named as Do names a result it cannot store (the key, not the value).
			return nil, s.named(hooks.IdempotencyComplete, key, fmt.Errorf("idempotency: result not encoded: %w", err))
		}
		ran = v
		return data, nil
	}, opts...)
	switch {
	case !replayed:
		return ran, false, err // ran is zero unless fn succeeded
	case err != nil:
		return zero, false, err
	}
	v, err := codec.Decode(stored)
	if err != nil {
		return zero, false, s.named(hooks.IdempotencyBegin, key, fmt.Errorf("idempotency: stored result not decoded: %w", err))
	}
	return v, true, nil
}
