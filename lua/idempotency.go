package lua

// Scripts of the idempotency claims (package idempotency). Each works on
// one hash key; the .lua files give their KEYS, ARGV, replies and errors.
var (
	// IdempotencyBegin claims a key or reports its claim (Store.Begin).
	IdempotencyBegin = mustLoad("idempotency_begin")
	// IdempotencyComplete stores the result of the caller's pending claim
	// (Store.Complete).
	IdempotencyComplete = mustLoad("idempotency_complete")
	// IdempotencyAbandon deletes the caller's pending claim (Store.Abandon).
	IdempotencyAbandon = mustLoad("idempotency_abandon")
)
