package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/contract"
)

// storeOf returns a store on c (an error naming coord when c is nil).
func storeOf(c *coordination.Coordinator) (*idempotency.Store, error) { return idempotency.New(c) }

// beginWant runs Begin on c and checks the state it answers.
func beginWant(ctx context.Context, c *coordination.Coordinator, key string, want idempotency.State, opts ...idempotency.BeginOption) (idempotency.Claim, error) {
	s, err := storeOf(c)
	if err != nil {
		return idempotency.Claim{}, err
	}
	claim, err := s.Begin(ctx, key, time.Minute, opts...)
	if err != nil {
		return claim, err
	}
	return claim, contract.Expect("Begin state", claim.State, want)
}

func TestContract(t *testing.T) {
	fp := idempotency.WithFingerprint
	contract.Run(t, contract.Spec{
		Primitive: "idempotency",
		Keys:      func(name string) []string { return []string{name} },
		Scenario: func(name string) []contract.Step {
			var claim, other, waited idempotency.Claim
			abandoned, waiting := name+":abandoned", name+":waiting"
			return []contract.Step{
				{Name: "Begin (started)", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					claim, err = beginWant(ctx, c, name, idempotency.Started, fp("a"))
					return err
				}},
				{Name: "Begin again (in progress)", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					got, err := beginWant(ctx, c, name, idempotency.InProgress, fp("a"))
					if err == nil && (got.Remaining <= 0 || got.Remaining > time.Minute) {
						err = fmt.Errorf("Remaining = %v, want in (0, 1m]", got.Remaining)
					}
					return err
				}},
				{Name: "Complete", Op: hooks.IdempotencyComplete, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := storeOf(c)
					if err != nil {
						return err
					}
					ok, err := s.Complete(ctx, name, claim.Owner, []byte("result\x00"))
					if err == nil {
						err = contract.Expect("Complete", ok, true)
					}
					return err
				}},
				{Name: "Complete again (refused)", Op: hooks.IdempotencyComplete, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := storeOf(c)
					if err != nil {
						return err
					}
					ok, err := s.Complete(ctx, name, claim.Owner, []byte("second"))
					if err == nil {
						err = contract.Expect("second Complete", ok, false)
					}
					return err
				}},
				{Name: "Begin (completed)", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					got, err := beginWant(ctx, c, name, idempotency.Completed, fp("a"))
					if err == nil {
						err = contract.Expect("Result", string(got.Result), "result\x00")
					}
					return err
				}},
				{Name: "Begin with another fingerprint (mismatch)", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := beginWant(ctx, c, name, idempotency.FingerprintMismatch, fp("b"))
					return err
				}},
				{Name: "Begin on a new key", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					other, err = beginWant(ctx, c, abandoned, idempotency.Started)
					return err
				}},
				{Name: "Abandon", Op: hooks.IdempotencyAbandon, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := storeOf(c)
					if err != nil {
						return err
					}
					ok, err := s.Abandon(ctx, abandoned, other.Owner)
					if err == nil {
						err = contract.Expect("Abandon", ok, true)
					}
					return err
				}},
				{Name: "Abandon again (nothing)", Op: hooks.IdempotencyAbandon, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := storeOf(c)
					if err != nil {
						return err
					}
					ok, err := s.Abandon(ctx, abandoned, other.Owner)
					if err == nil {
						err = contract.Expect("second Abandon", ok, false)
					}
					return err
				}},
				{Name: "Begin after Abandon (started)", Op: hooks.IdempotencyBegin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					waited, err = beginWant(ctx, c, waiting, idempotency.Started)
					return err
				}},
				{Name: "Begin waiting up to its bound (in progress)", Op: hooks.IdempotencyBegin, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := beginWant(ctx, c, waiting, idempotency.InProgress, idempotency.WithWait(30*time.Millisecond))
					return err
				}},
				{Name: "Begin waiting, caller gives up", Op: hooks.IdempotencyBegin, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					// Long enough for the first Begin's answer on a loaded
					// machine: the caller gives up while waiting, not
					// before the first answer.
					ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
					_, err := beginWant(ctx, c, waiting, idempotency.InProgress, idempotency.WithWait(time.Minute))
					if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, coordination.ErrNotAcquired) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}},
				{Name: "Complete the waited-for claim", Op: hooks.IdempotencyComplete, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := storeOf(c)
					if err != nil {
						return err
					}
					ok, err := s.Complete(ctx, waiting, waited.Owner, nil)
					if err == nil {
						err = contract.Expect("Complete", ok, true)
					}
					return err
				}},
			}
		},
		BadInputs: []contract.BadInput{
			{Arg: "key", Op: hooks.IdempotencyBegin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := beginWant(ctx, c, "", idempotency.Started)
				return err
			}},
			{Arg: "ttl", Op: hooks.IdempotencyBegin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, err = s.Begin(ctx, "k", 0)
				return err
			}},
			{Arg: "resultTTL", Op: hooks.IdempotencyBegin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := beginWant(ctx, c, "k", idempotency.Started, idempotency.WithResultTTL(time.Microsecond))
				return err
			}},
			{Arg: "wait", Op: hooks.IdempotencyBegin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := beginWant(ctx, c, "k", idempotency.Started, idempotency.WithWait(-time.Second))
				return err
			}},
			{Arg: "owner", Op: hooks.IdempotencyComplete, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, err = s.Complete(ctx, "k", "", []byte("r"))
				return err
			}},
			{Arg: "key", Op: hooks.IdempotencyComplete, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, err = s.Complete(ctx, "", "owner", []byte("r"))
				return err
			}},
			{Arg: "owner", Op: hooks.IdempotencyAbandon, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, err = s.Abandon(ctx, "k", "")
				return err
			}},
			{Arg: "key", Op: hooks.IdempotencyAbandon, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, err = s.Abandon(ctx, "", "owner")
				return err
			}},
			{Arg: "fn", Op: hooks.IdempotencyBegin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := storeOf(c)
				if err != nil {
					return err
				}
				_, _, err = s.Do(ctx, "k", time.Minute, "fp", nil)
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := idempotency.New(nil)
				return err
			}},
		},
		LostReply: &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				_, err := beginWant(ctx, c, name, idempotency.Started)
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				// Gone, or abandoned (a free key remembering the fence).
				v, err := raw.Get(ctx, key(name)).Result()
				if errors.Is(err, redis.Nil) {
					return true, nil
				}
				return strings.HasPrefix(v, "A"), err
			},
		},
		Metrics: []string{
			"coordination.idempotency.begins",
			"coordination.idempotency.completes",
			"coordination.idempotency.abandons",
		},
	})
}
