package hooks

// Operation names. Each public operation of each primitive is admitted under
// exactly one of these names; the table in the package documentation says
// which call uses which.
const (
	// Owner-token lock (package lock).
	LockAcquire = "LOCK ACQUIRE"
	LockRenew   = "LOCK RENEW"
	LockVerify  = "LOCK VERIFY"
	LockRelease = "LOCK RELEASE"

	// Fencing-token lock and fenced writes (package fencing).
	FencedLockAcquire = "FENCED LOCK ACQUIRE"
	FencedLockRenew   = "FENCED LOCK RENEW"
	FencedLockVerify  = "FENCED LOCK VERIFY"
	FencedLockRelease = "FENCED LOCK RELEASE"
	FencedWrite       = "FENCED WRITE"
	FencedRead        = "FENCED READ"

	// Hash-field leases (package lock).
	LeaseAcquire = "LEASE ACQUIRE"
	LeaseRenew   = "LEASE RENEW"
	LeaseVerify  = "LEASE VERIFY"
	LeaseRelease = "LEASE RELEASE"

	// Read-write leases (package rwlease).
	RWLeaseReadAcquire  = "RWLEASE READ ACQUIRE"
	RWLeaseWriteAcquire = "RWLEASE WRITE ACQUIRE"
	RWLeaseRenew        = "RWLEASE RENEW"
	RWLeaseVerify       = "RWLEASE VERIFY"
	RWLeaseRelease      = "RWLEASE RELEASE"

	// Semaphore (package semaphore).
	SemaphoreAcquire = "SEMAPHORE ACQUIRE"
	SemaphoreRenew   = "SEMAPHORE RENEW"
	SemaphoreVerify  = "SEMAPHORE VERIFY"
	SemaphoreRelease = "SEMAPHORE RELEASE"
	SemaphoreRead    = "SEMAPHORE READ"
	SemaphoreUpdate  = "SEMAPHORE UPDATE"
	SemaphoreDrain   = "SEMAPHORE DRAIN"

	// Countdown latch (package latch).
	LatchCreate    = "LATCH CREATE"
	LatchJoin      = "LATCH JOIN"
	LatchReset     = "LATCH RESET"
	LatchCountDown = "LATCH COUNT DOWN"
	LatchWait      = "LATCH WAIT"
	LatchRead      = "LATCH READ"

	// Leader election (package leader).
	LeaderCampaign = "LEADER CAMPAIGN"
	LeaderRead     = "LEADER READ"
	LeaderProclaim = "LEADER PROCLAIM"

	// Idempotency claims (package idempotency).
	IdempotencyBegin    = "IDEMPOTENCY BEGIN"
	IdempotencyComplete = "IDEMPOTENCY COMPLETE"
	IdempotencyAbandon  = "IDEMPOTENCY ABANDON"
	IdempotencyForget   = "IDEMPOTENCY FORGET"
	IdempotencyFail     = "IDEMPOTENCY FAIL"

	// Rate limiters (package ratelimit).
	RateLimitAcquire       = "RATE LIMIT ACQUIRE"
	RateLimitRelease       = "RATE LIMIT RELEASE"
	RateLimitRenew         = "RATE LIMIT RENEW"
	RateLimitVerify        = "RATE LIMIT VERIFY"
	RateLimitSettle        = "RATE LIMIT SETTLE"
	RateLimitUpdate        = "RATE LIMIT UPDATE"
	RateLimitDenyListRead  = "RATE LIMIT DENY LIST READ"
	RateLimitDenyListWrite = "RATE LIMIT DENY LIST WRITE"
	RateLimitReset         = "RATE LIMIT RESET"
	RateLimitPeek          = "RATE LIMIT PEEK"
	RateLimitAdjust        = "RATE LIMIT ADJUST"

	// Allow lists (package ratelimit).
	RateLimitAllowListRead  = "RATE LIMIT ALLOW LIST READ"
	RateLimitAllowListWrite = "RATE LIMIT ALLOW LIST WRITE"

	// Quorum lock (package redlock).
	RedlockAcquire = "REDLOCK ACQUIRE"
	RedlockRenew   = "REDLOCK RENEW"
	RedlockVerify  = "REDLOCK VERIFY"
	RedlockRelease = "REDLOCK RELEASE"
)

// Operation names of adopting, reading and force-releasing a held lease
// (Adopt, Holder or Holders, ForceRelease); a semaphore's Holders is
// admitted as [SemaphoreRead], as its State is, and a concurrency
// limiter's as [RateLimitPeek].
const (
	LockAdopt              = "LOCK ADOPT"
	LockRead               = "LOCK READ"
	LockForceRelease       = "LOCK FORCE RELEASE"
	FencedLockAdopt        = "FENCED LOCK ADOPT"
	FencedLockRead         = "FENCED LOCK READ"
	FencedLockForceRelease = "FENCED LOCK FORCE RELEASE"
	LeaseAdopt             = "LEASE ADOPT"
	LeaseRead              = "LEASE READ"
	LeaseForceRelease      = "LEASE FORCE RELEASE"
	RWLeaseAdopt           = "RWLEASE ADOPT"
	RWLeaseRead            = "RWLEASE READ"
	RWLeaseForceRelease    = "RWLEASE FORCE RELEASE"
	SemaphoreAdopt         = "SEMAPHORE ADOPT"
	SemaphoreForceRelease  = "SEMAPHORE FORCE RELEASE"
	RedlockAdopt           = "REDLOCK ADOPT"
	RedlockRead            = "REDLOCK READ"
	RedlockForceRelease    = "REDLOCK FORCE RELEASE"
	RateLimitAdopt         = "RATE LIMIT ADOPT"
	RateLimitForceRelease  = "RATE LIMIT FORCE RELEASE"
)
