-- lock_refresh: reset the TTL of an owner-token lock held by the caller.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
-- ARGV[2]  new TTL in milliseconds (integer >= 1)
--
-- Reply    1  the caller holds the lock; its TTL is now ARGV[2] ms
--          0  the lock is free or held by another owner (nothing changed)
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or (v and v == ARGV[1] .. '+') then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
