package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
)

var (
	errRetryLater = errors.New("the first request is still running; retry later")
	errKeyReused  = errors.New("the key was used for another request")
	errTakenOver  = errors.New("a later claim of this key wrote first")
)

// The package documentation's snippet: the charge runs once, the retry
// gets its result back.
func ExampleStore_Complete() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	store, err := idempotency.New(coord)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		receipt, err := snippetCharge(ctx, store, "order-42", "sha256:...")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", receipt)
	}
	// Output:
	// charging
	// receipt 1
	// receipt 1
}

func snippetCharge(ctx context.Context, store *idempotency.Store, key, digest string) ([]byte, error) {
	claim, err := store.Begin(ctx, key, 10*time.Minute, idempotency.WithFingerprint(digest))
	if err != nil {
		return nil, err
	}
	switch claim.State {
	case idempotency.Started: // ours: do the work, then store its result
		result := charge()
		if _, err := store.Complete(ctx, key, claim.Owner, result); err != nil {
			return nil, err
		}
		return result, nil
	case idempotency.Completed: // done before: replay its result
		return claim.Result, nil
	case idempotency.InProgress: // someone else is doing it now
		return nil, errRetryLater
	default: // idempotency.FingerprintMismatch: the key belongs to another request
		return nil, errKeyReused
	}
}

func charge() []byte {
	fmt.Println("charging")
	return []byte("receipt 1")
}

// The package documentation's fencing snippet: Do keeps the claim alive
// while the work runs and gives it the claim's fencing token, which the
// work passes to a resource that checks tokens. A second booking with the
// key replays the first's result.
func ExampleFenceFrom() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	store, err := idempotency.New(coord)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		res, err := snippetBook(ctx, coord, store, "booking-7", "sha256:...", []byte("room 12"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", res)
	}
	ledger, err := fencing.NewGuarded(coord, "ledger:booking-7")
	if err != nil {
		log.Fatal(err)
	}
	entry, fence, _, err := ledger.Get(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ledger: %s, written with a fence: %v\n", entry, fence > 0)
	// Output:
	// booked
	// booked
	// ledger: room 12, written with a fence: true
}

func snippetBook(ctx context.Context, coord *coordination.Coordinator, store *idempotency.Store, key, digest string, entry []byte) ([]byte, error) {
	res, _, err := store.Do(ctx, key, time.Minute, digest, func(ctx context.Context) ([]byte, error) {
		ledger, err := fencing.NewGuarded(coord, "ledger:"+key)
		if err != nil {
			return nil, err
		}
		fence, _ := idempotency.FenceFrom(ctx)
		ok, _, err := ledger.Set(ctx, fence, entry, 24*time.Hour)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errTakenOver // a later claim of this key wrote first
		}
		return []byte("booked"), nil
	})
	return res, err
}
