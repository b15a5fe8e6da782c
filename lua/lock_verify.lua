-- lock_verify: report whether the caller holds an owner-token lock. Writes
-- nothing.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
--
-- Reply    1  held by the caller
--          0  free or held by another owner
-- Errors   WRONGTYPE  the key holds a non-string value
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or (v and v == ARGV[1] .. '+') then
  return 1
end
return 0
