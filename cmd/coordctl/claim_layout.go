package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// legacyClaimLayout names the hash layout of idempotency claims written
// by releases before the string layout: the library no longer reads them.
const legacyClaimLayout = "hash (earlier releases; no longer read)"

// legacyClaimProblem marks a claim of the hash layout: every operation of
// the library on it fails with ErrBadState (wrong Redis type) and changes nothing.
func legacyClaimProblem(r *report) *report {
	r.add("repair", "coordctl repair claim --key KEY")
	return r.bad("a claim of the hash layout of earlier releases: the library no longer reads it (ErrBadState, wrong Redis type); delete it with coordctl repair claim, or let it expire")
}

// readClaimResult reads the stored result of the completed claim at key:
// "C" <completion id> ":" <fp> <result>.
func readClaimResult(ctx context.Context, c redis.UniversalClient, key string) (string, error) {
	v, err := c.Get(ctx, key).Result()
	if err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(v, "A"):
		return "", fmt.Errorf("%w: the claim at %q is abandoned: no result (the next Begin claims it afresh)", errRefused, key)
	case !strings.HasPrefix(v, "C") || len(v) < 38 || v[37] != ':':
		return "", fmt.Errorf("%w: the claim at %q is pending: no result yet", errRefused, key)
	}
	_, res, ok := claimFingerprint(v[38:])
	if !ok {
		return "", fmt.Errorf("%w: the claim at %q has a bad fingerprint", errRefused, key)
	}
	return res, nil
}
