package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
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
	errCheckFirst = errors.New("an earlier attempt failed; check its outcome, then forget the key")
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
	case idempotency.Failed: // an earlier attempt failed, outcome unknown
		return nil, errCheckFirst
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

// Report is what buildReport computes.
type Report struct {
	Month string `json:"month"`
	Sales int    `json:"sales"`
}

// buildReport stands for an expensive computation.
func buildReport(ctx context.Context) (Report, error) {
	time.Sleep(50 * time.Millisecond)
	return Report{Month: "2026-12", Sales: 1234}, nil
}

// A distributed single-flight: three callers (standing for three
// processes) ask for the same report at once; one builds it, the others
// wait for its stored result.
func ExampleDoValue() {
	store, stop, err := exampleStore()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	var wg sync.WaitGroup
	var builds, shares atomic.Int32
	for range 3 {
		wg.Go(func() {
			report, shared, err := idempotency.DoValue(ctx, store, "report:2026-12", time.Hour, "",
				idempotency.JSONCodec[Report](), buildReport, idempotency.WithWait(2*time.Minute))
			if err != nil {
				log.Print(err)
				return
			}
			if shared {
				shares.Add(1)
			} else {
				builds.Add(1)
			}
			if report.Sales != 1234 {
				log.Printf("unexpected report %+v", report)
			}
		})
	}
	wg.Wait()
	fmt.Printf("built %d time(s), shared %d time(s)\n", builds.Load(), shares.Load())
	// Output:
	// built 1 time(s), shared 2 time(s)
}
