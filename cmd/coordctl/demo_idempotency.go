package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/idempotency"
)

func init() {
	addScenario(scenario{
		order: 40,
		name:  "idempotency",
		title: "Idempotent requests: duplicated payments are charged once",
		run:   runIdempotencyDemo,
	})
}

// runIdempotencyDemo runs a payment handler on three simulated replicas (a
// coordinator and middleware each, sharing Redis) and fires the same
// payment from many clients at once, spread over the replicas.
func runIdempotencyDemo(ctx context.Context, d *demo) error {
	const replicas, clients = 3, 12
	var charges atomic.Int32
	build := func(wait time.Duration) ([]http.Handler, error) {
		hs := make([]http.Handler, replicas)
		for i := range hs {
			store, err := idempotency.New(d.coord())
			if err != nil {
				return nil, err
			}
			mw, err := idempotency.NewMiddleware(store, idempotency.WithKeyRequired(true),
				idempotency.WithClaimTTL(30*time.Second), idempotency.WithWaitForOriginal(wait))
			if err != nil {
				return nil, err
			}
			actor := fmt.Sprintf("replica-%d", i+1)
			hs[i] = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := charges.Add(1)
				d.logf(actor, "charging the card (charge #%d)", n)
				time.Sleep(150 * time.Millisecond)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, `{"payment":%d,"amount":1999}`, n)
			}))
		}
		return hs, nil
	}
	send := func(h http.Handler, key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set(idempotency.HeaderKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// burst sends the same request from every client at once, client i to
	// replica i mod 3, and counts the answers.
	burst := func(hs []http.Handler, key, body string) (original, replayed, conflicts, other int, originalBody []byte, same bool) {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			start = make(chan struct{})
			recs  []*httptest.ResponseRecorder
		)
		for i := range clients {
			wg.Go(func() {
				<-start
				rec := send(hs[i%replicas], key, body)
				d.logf(fmt.Sprintf("client-%02d", i+1), "-> replica-%d: %d %s%s", i%replicas+1, rec.Code,
					http.StatusText(rec.Code), map[bool]string{true: " (replayed)"}[rec.Header().Get(idempotency.HeaderReplayed) == "true"])
				mu.Lock()
				recs = append(recs, rec)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		same = true
		for _, rec := range recs {
			switch {
			case rec.Code == http.StatusCreated && rec.Header().Get(idempotency.HeaderReplayed) == "":
				original++
				originalBody = rec.Body.Bytes()
			case rec.Code == http.StatusCreated:
				replayed++
			case rec.Code == http.StatusConflict:
				conflicts++
			default:
				other++
			}
		}
		for _, rec := range recs {
			if rec.Code == http.StatusCreated && !bytes.Equal(rec.Body.Bytes(), originalBody) {
				same = false
			}
		}
		return
	}

	hs, err := build(0)
	if err != nil {
		return err
	}
	const body = `{"amount":1999,"currency":"EUR"}`
	d.logf("demo", "%d clients send the same payment (Idempotency-Key order-42) at once to %d replicas", clients, replicas)
	orig, rep, conf, other, first, same := burst(hs, "order-42", body)
	d.check("idempotency: duplicates charge once", charges.Load() == 1 && orig == 1,
		"%d charge(s), %d original response for %d identical requests", charges.Load(), orig, clients)
	d.check("idempotency: the others get 409 or the replay", orig+rep+conf == clients && other == 0,
		"%d replayed, %d answered 409 Conflict, %d other", rep, conf, other)

	retry := send(hs[1], "order-42", body)
	d.logf("client-01", "retries later -> replica-2: %d, Idempotent-Replayed: %q", retry.Code, retry.Header().Get(idempotency.HeaderReplayed))
	d.check("idempotency: a retry replays the original", retry.Code == http.StatusCreated &&
		retry.Header().Get(idempotency.HeaderReplayed) == "true" && bytes.Equal(retry.Body.Bytes(), first) && same &&
		retry.Header().Get("Location") == "/payments/1",
		"status %d, body %s, Location %s", retry.Code, retry.Body.Bytes(), retry.Header().Get("Location"))

	reused := send(hs[2], "order-42", `{"amount":5,"currency":"EUR"}`)
	d.logf("client-02", "same key, another amount -> replica-3: %d %s", reused.Code, http.StatusText(reused.Code))
	d.check("idempotency: a reused key is refused", reused.Code == http.StatusUnprocessableEntity && charges.Load() == 1,
		"%d %s, still %d charge(s)", reused.Code, reused.Header().Get("Content-Type"), charges.Load())

	waiting, err := build(5 * time.Second)
	if err != nil {
		return err
	}
	d.logf("demo", "again with another key, retries waiting for the original instead of 409")
	before := charges.Load()
	orig, rep, conf, other, _, same = burst(waiting, "order-43", body)
	d.check("idempotency: waiting retries all get the result", charges.Load()-before == 1 && orig == 1 &&
		rep == clients-1 && conf == 0 && other == 0 && same,
		"%d charge(s), %d original, %d replayed, %d conflicts", charges.Load()-before, orig, rep, conf)
	return nil
}
