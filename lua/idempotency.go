package lua

// Scripts of the idempotency claims (package idempotency).
var (
	IdempotencyBegin    = mustLoad("idempotency_begin")
	IdempotencyComplete = mustLoad("idempotency_complete")
	IdempotencyAbandon  = mustLoad("idempotency_abandon")
)
