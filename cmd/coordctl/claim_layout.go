package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// legacyClaimLayout names the hash layout of idempotency claims.
const legacyClaimLayout = "hash"

// legacyClaimProblem: on this version of the library the hash layout is
// the current one.
func legacyClaimProblem(r *report) *report { return r }

// readClaimResult reads the stored result of the completed claim at key.
func readClaimResult(ctx context.Context, c redis.UniversalClient, key string) (string, error) {
	h, err := c.HMGet(ctx, key, "state", "result").Result()
	if err != nil {
		return "", err
	}
	if s, _ := h[0].(string); s != "completed" {
		return "", fmt.Errorf("%w: the claim at %q is %v: no result yet", errRefused, key, h[0])
	}
	res, _ := h[1].(string)
	return res, nil
}
