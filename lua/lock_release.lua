-- lock_release: delete an owner-token lock held by the caller and wake
-- waiters if any found it held.
--
-- KEYS[1]  lock key (the owner token, with a trailing '+' once a waiter
--          found it held; see lock_acquire)
-- ARGV[1]  owner token of the caller
--
-- Reply     1  released (deleted); when the value carried the waiter mark
--              '+', waiters are notified on the channel
--              "coordination:" .. KEYS[1] (best effort: a channel the ACL
--              denies does not fail the release)
--           0  already gone (expired or released before); nothing changed
--          -1  held by another owner; nothing changed
-- Errors   WRONGTYPE  the key holds a non-string value (nothing written)
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if v == false then
  return 0
end
if v ~= ARGV[1] .. '+' then
  return -1
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', 'coordination:' .. KEYS[1], 'released')
return 1
