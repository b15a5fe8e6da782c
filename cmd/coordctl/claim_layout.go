package main

// legacyClaimLayout names the hash layout of idempotency claims.
const legacyClaimLayout = "hash"

// legacyClaimProblem: on this version of the library the hash layout is
// the current one.
func legacyClaimProblem(r *report) *report { return r }
